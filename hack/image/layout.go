package main

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// writeLayout replaces dir with an OCI image layout whose index.json names
// idx twice over: io.containerd.image.name (the full reference; containerd's
// import, `kind load image-archive` and Docker >= 25's load use it) and
// org.opencontainers.image.ref.name (the tag; skopeo's and oras's oci:dir:tag).
//
// The layout is written next to dir and renamed into place, so a failed run
// never leaves half a layout, and a layout left by an earlier run does not
// accumulate (layout.AppendIndex would add to its index.json).
func writeLayout(dir string, idx v1.ImageIndex, ref, tag string) error {
	if err := replaceable(dir); err != nil {
		return err
	}
	tmp := dir + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	p, err := layout.Write(tmp, empty.Index)
	if err != nil {
		return err
	}
	err = p.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		"io.containerd.image.name":          ref,
		"org.opencontainers.image.ref.name": tag,
	}))
	if err != nil {
		return err
	}
	if err := normalizeModes(tmp); err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	return os.Rename(tmp, dir)
}

// normalizeModes makes the layout readable by anyone (a registry or a
// container runtime running as another user): the layout package writes
// small files 0777 minus umask and blobs 0600.
func normalizeModes(dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.Chmod(p, 0o755)
		}
		return os.Chmod(p, 0o644)
	})
}

// replaceable refuses to delete a directory that is not an image layout (a
// mistyped --oci-dir must not remove someone's work).
func replaceable(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if len(entries) == 0 {
		return nil
	}
	if _, err := os.Stat(filepath.Join(dir, "oci-layout")); err != nil {
		return fmt.Errorf("exists and is not an OCI image layout (no oci-layout file); remove it or name another directory")
	}
	return nil
}

// writeArchive writes the layout directory as a tar (an "OCI archive", what
// `podman load`, `ctr images import` and `skopeo copy oci-archive:` read), with
// entries in lexical order and fixed owners, modes and mtimes, so that the
// same layout always gives the same bytes.
func writeArchive(dir, path string, mtime time.Time) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	defer os.Remove(tmp) // after a successful rename there is nothing to remove
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		hdr := &tar.Header{Name: filepath.ToSlash(rel), ModTime: mtime, Mode: 0o644, Typeflag: tar.TypeReg}
		if d.IsDir() {
			hdr.Name += "/"
			hdr.Mode = 0o755
			hdr.Typeflag = tar.TypeDir
			return tw.WriteHeader(hdr)
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s is not a regular file", p)
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		hdr.Size = info.Size()
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		src, err := os.Open(p)
		if err != nil {
			return err
		}
		defer src.Close()
		_, err = io.Copy(tw, src)
		return err
	})
	if err == nil {
		err = tw.Close()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
