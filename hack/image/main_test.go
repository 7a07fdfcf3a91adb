package main

import (
	"bytes"
	"debug/elf"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/layout"
)

const testRevision = "0123456789abcdef0123456789abcdef01234567"

func Test_parseFlags(t *testing.T) {
	good := map[string]string{
		"--binary":            "linux/amd64=a",
		"--version":           "0.1.0",
		"--revision":          testRevision,
		"--source-date-epoch": "1700000000",
		"--oci-dir":           "oci",
	}
	tests := map[string]struct {
		change  map[string]string // flag -> value; "" drops the flag
		extra   []string
		wantErr string
	}{
		"if every flag is good, accept them": {},
		"if a platform has no binary, name the missing --binary": {
			change:  map[string]string{"--binary": ""},
			wantErr: "--binary linux/amd64=<path> is required: the image is built for linux/amd64 and linux/arm64",
		},
		"if a platform is not built, list the ones that are": {
			extra:   []string{"--binary", "linux/s390x=c"},
			wantErr: `invalid value "linux/s390x=c" for flag -binary: unsupported platform "linux/s390x": want one of linux/amd64 and linux/arm64`,
		},
		"if a platform is given twice, say so": {
			extra:   []string{"--binary", "linux/arm64=c"},
			wantErr: `invalid value "linux/arm64=c" for flag -binary: linux/arm64 given twice`,
		},
		"if --binary has no path, show the form": {
			change:  map[string]string{"--binary": "linux/amd64"},
			wantErr: `invalid value "linux/amd64" for flag -binary: want platform=path, such as linux/amd64=bin/image/linux_amd64/webhook-guard`,
		},
		"if --version carries the tag's v, ask for the VERSION file's form": {
			change:  map[string]string{"--version": "v0.1.0"},
			wantErr: `--version "v0.1.0": want the VERSION file's form, such as 0.1.0 (the tag adds the "v")`,
		},
		"if --revision is not a commit hash, say what is wanted": {
			change:  map[string]string{"--revision": "HEAD"},
			wantErr: `--revision "HEAD": want a full commit hash (git rev-parse HEAD), optionally with -dirty`,
		},
		"if there is no source date epoch, say where it comes from": {
			change:  map[string]string{"--source-date-epoch": ""},
			wantErr: "--source-date-epoch (or $SOURCE_DATE_EPOCH) is required: the image's timestamps, so that the same commit gives the same digest; use git log -1 --format=%ct",
		},
		"if the source date epoch is not Unix seconds, say so": {
			change:  map[string]string{"--source-date-epoch": "2026-01-01"},
			wantErr: `--source-date-epoch "2026-01-01": want Unix seconds (git log -1 --format=%ct)`,
		},
		"if there is no --oci-dir, ask for one": {
			change:  map[string]string{"--oci-dir": ""},
			wantErr: "--oci-dir is required: the OCI image layout is what the archive and a later push are made from",
		},
		"if --push is not a reference, name the flag": {
			extra:   []string{"--push", "ghcr.io/Upper/Case:v1"},
			wantErr: `--push "ghcr.io/Upper/Case:v1": could not parse reference: ghcr.io/Upper/Case:v1`,
		},
		"if there are positional arguments, say that everything is a flag": {
			extra:   []string{"push"},
			wantErr: `unexpected arguments ["push"]: everything is a flag`,
		},
	}
	t.Setenv("SOURCE_DATE_EPOCH", "")
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			args := []string{"--binary", "linux/arm64=b"}
			for flag, v := range good {
				if c, ok := tc.change[flag]; ok {
					v = c
				}
				if v != "" {
					args = append(args, flag, v)
				}
			}
			args = append(args, tc.extra...)
			_, err := parseFlags(args, io.Discard)
			if got := errString(err); got != tc.wantErr {
				t.Errorf("parseFlags(%q) error =\n  %q\nwant\n  %q", args, got, tc.wantErr)
			}
		})
	}
}

// Test_runIsReproducible builds the image from the same two fake binaries
// several times: the same inputs give the same index digest and a
// byte-identical archive, a rerun replaces the layout instead of adding to
// it, and a different source date epoch gives a different digest (so the
// epoch, not the clock, is what the image records).
func Test_runIsReproducible(t *testing.T) {
	amd64 := fakeBinary(t, elf.EM_X86_64, false, "the amd64 guard")
	arm64 := fakeBinary(t, elf.EM_AARCH64, false, "the arm64 guard")
	build := func(dir, epoch string) (digest string, archive []byte) {
		t.Helper()
		ociDir, archivePath := filepath.Join(dir, "oci"), filepath.Join(dir, "webhook-guard.oci.tar")
		var stdout bytes.Buffer
		err := run(t.Context(), []string{
			"--binary", "linux/amd64=" + amd64, "--binary", "linux/arm64=" + arm64,
			"--version", "0.1.0", "--revision", testRevision, "--source-date-epoch", epoch,
			"--oci-dir", ociDir, "--archive", archivePath,
		}, &stdout, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		p, err := layout.FromPath(ociDir)
		if err != nil {
			t.Fatal(err)
		}
		ii, err := p.ImageIndex()
		if err != nil {
			t.Fatal(err)
		}
		im, err := ii.IndexManifest()
		if err != nil {
			t.Fatal(err)
		}
		if len(im.Manifests) != 1 {
			t.Fatalf("%s/index.json lists %d manifests, want the one image index", ociDir, len(im.Manifests))
		}
		d := im.Manifests[0].Digest.String()
		if !strings.Contains(stdout.String(), "index "+d) {
			t.Errorf("run printed no %q:\n%s", "index "+d, stdout.String())
		}
		archive, err = os.ReadFile(archivePath)
		if err != nil {
			t.Fatal(err)
		}
		return d, archive
	}

	dir := t.TempDir()
	first, firstArchive := build(dir, "1700000000")
	again, againArchive := build(dir, "1700000000")
	elsewhere, elsewhereArchive := build(t.TempDir(), "1700000000")
	if first != again || first != elsewhere {
		t.Errorf("the same inputs gave index digests %s, %s and %s", first, again, elsewhere)
	}
	if !bytes.Equal(firstArchive, againArchive) || !bytes.Equal(firstArchive, elsewhereArchive) {
		t.Errorf("the same inputs gave different archives (%d, %d and %d bytes)", len(firstArchive), len(againArchive), len(elsewhereArchive))
	}
	if later, _ := build(t.TempDir(), "1700000001"); later == first {
		t.Errorf("a different source date epoch gave the same digest %s", later)
	}
}

func Test_writeLayoutRefusesToReplaceOtherDirectories(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := writeLayout(dir, nil, "example.com/a:v1", "v1")
	want := "exists and is not an OCI image layout (no oci-layout file); remove it or name another directory"
	if got := errString(err); got != want {
		t.Errorf("writeLayout over a non-layout directory: error = %q, want %q", got, want)
	}
	if _, err := os.Stat(filepath.Join(dir, "notes.txt")); err != nil {
		t.Errorf("the directory's file is gone: %v", err)
	}
}
