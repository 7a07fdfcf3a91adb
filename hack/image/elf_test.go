package main

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
)

// fakeBinary writes a tiny ELF file for machine: a header (and, with interp,
// one PT_INTERP program header, as a dynamically linked binary has) followed
// by body, which makes two fake binaries differ.
func fakeBinary(t *testing.T, machine elf.Machine, interp bool, body string) string {
	t.Helper()
	const ehsize, phsize = 64, 56
	h := elf.Header64{
		Ident:     [elf.EI_NIDENT]byte{0x7f, 'E', 'L', 'F', byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT)},
		Type:      uint16(elf.ET_EXEC),
		Machine:   uint16(machine),
		Version:   uint32(elf.EV_CURRENT),
		Ehsize:    ehsize,
		Phentsize: phsize,
	}
	if interp {
		h.Phoff, h.Phnum = ehsize, 1
	}
	var b bytes.Buffer
	if err := binary.Write(&b, binary.LittleEndian, h); err != nil {
		t.Fatal(err)
	}
	if interp {
		if err := binary.Write(&b, binary.LittleEndian, elf.Prog64{Type: uint32(elf.PT_INTERP)}); err != nil {
			t.Fatal(err)
		}
	}
	b.WriteString(body)
	path := filepath.Join(t.TempDir(), "webhook-guard")
	if err := os.WriteFile(path, b.Bytes(), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func Test_readBinary(t *testing.T) {
	amd64, arm64 := platforms[0], platforms[1]
	notELF := filepath.Join(t.TempDir(), "script")
	if err := os.WriteFile(notELF, []byte("#!/bin/sh\n# a shell script where a Go binary should be, long enough for an ELF header\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		path    string
		p       platform
		wantErr string
	}{
		"if the binary is a static ELF for the platform, accept it": {
			path: fakeBinary(t, elf.EM_AARCH64, false, "arm64"), p: arm64,
		},
		"if the binary is for another machine, say which GOARCH to build": {
			path: fakeBinary(t, elf.EM_X86_64, false, "amd64"), p: arm64,
			wantErr: "built for EM_X86_64, want EM_AARCH64 for linux/arm64 (GOARCH=arm64)",
		},
		"if the binary is dynamically linked, say to build without cgo": {
			path: fakeBinary(t, elf.EM_X86_64, true, "amd64"), p: amd64,
			wantErr: "dynamically linked; the image has no C library: build with CGO_ENABLED=0",
		},
		"if the file is not ELF, say so": {
			path: notELF, p: amd64,
			wantErr: "not an ELF binary: bad magic number '[35 33 47 98]' in record at byte 0x0",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := readBinary(tc.path, tc.p)
			if got := errString(err); got != tc.wantErr {
				t.Errorf("readBinary(%s) error = %q, want %q", tc.p, got, tc.wantErr)
			}
		})
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
