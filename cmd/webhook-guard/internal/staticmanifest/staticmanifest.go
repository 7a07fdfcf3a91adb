// Package staticmanifest writes `render static-manifest`'s files for
// kube-apiserver to read: atomically, and with Watch again whenever the
// rendered manifest changes, so the manifest follows the guard's
// certificate renewals. It knows nothing of flags; the command's package
// does.
package staticmanifest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// Rendered are the documents one render produces.
type Rendered struct {
	Manifest, Admission []byte
	// Grant is the RBAC grant that switches the manifest's skip condition
	// on (nil when it has none), for an administrator to apply.
	Grant []byte
}

// Paths are where Rendered's documents go.
type Paths struct {
	Manifest, Admission, Grant string
}

// Write writes the documents, the manifest last: it is what kube-apiserver
// watches.
func Write(paths Paths, r Rendered) error {
	if err := WriteAtomic(paths.Admission, r.Admission); err != nil {
		return err
	}
	if r.Grant != nil {
		if err := WriteAtomic(paths.Grant, r.Grant); err != nil {
			return err
		}
	}
	return WriteAtomic(paths.Manifest, r.Manifest)
}

// Watch renders at once and then every interval until ctx is done, and
// writes the files when the manifest changed. The manifest is replaced by
// rename, which kube-apiserver picks up within ~0.1 s; a render or write
// that fails is logged and leaves the previous files in place, so a
// half-renewed certificate never reaches kube-apiserver.
func Watch(ctx context.Context, interval time.Duration, log io.Writer, paths Paths, render func(context.Context) (Rendered, error)) error {
	var last []byte
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		r, err := render(ctx)
		switch {
		case err != nil:
			fmt.Fprintf(log, "render failed, keeping the previous files: %v\n", err)
		case !bytes.Equal(r.Manifest, last):
			if err := Write(paths, r); err != nil {
				fmt.Fprintf(log, "write failed: %v\n", err)
				break
			}
			last = r.Manifest
			fmt.Fprintf(log, "rendered %s\n", paths.Manifest)
		}
		// Checked before the select: with both ready, select picks at
		// random and would render once more after the cancel.
		if ctx.Err() != nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// WriteAtomic writes via a temporary file and rename, so a reader (the
// apiserver's file watcher) never sees a half-written file.
func WriteAtomic(path string, data []byte) error {
	// kube-apiserver (often another user than this process) must read the
	// manifest; it holds only a URL and a public CA certificate.
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil { //nolint:gosec // see above
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path))
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp.Name()) }() // gone after the rename; cleans up on error
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil { //nolint:gosec // readable by kube-apiserver, see above
		return err
	}
	return os.Rename(tmp.Name(), path)
}
