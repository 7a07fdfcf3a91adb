package main

import (
	"bytes"
	"debug/elf"
	"fmt"
	"os"
	"strings"
)

// platform is one image of the index.
type platform struct {
	os, arch, variant string
	// machine is the ELF machine a binary for the platform is built for.
	machine elf.Machine
}

// platforms are the images the index holds, in this order: the chart's nodes
// are amd64 or arm64 Linux. arm64's variant is v8, as Docker and containerd
// record it.
var platforms = []platform{
	{os: "linux", arch: "amd64", machine: elf.EM_X86_64},
	{os: "linux", arch: "arm64", variant: "v8", machine: elf.EM_AARCH64},
}

// String is the form --binary takes: os/arch.
func (p platform) String() string { return p.os + "/" + p.arch }

func platformList() string {
	s := make([]string, len(platforms))
	for i, p := range platforms {
		s[i] = p.String()
	}
	return strings.Join(s, " and ")
}

// readBinary reads a binary and checks that it can run in the image: a
// static ELF executable for the platform's machine. A wrong GOARCH or a cgo
// build would otherwise be packaged silently and fail only in the cluster
// (exec format error, or a missing dynamic loader in an image that has none).
func readBinary(path string, p platform) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("not an ELF binary: %w", err)
	}
	if f.Machine != p.machine {
		return nil, fmt.Errorf("built for %s, want %s for %s (GOARCH=%s)", f.Machine, p.machine, p, p.arch)
	}
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			return nil, fmt.Errorf("dynamically linked; the image has no C library: build with CGO_ENABLED=0")
		}
	}
	return b, nil
}
