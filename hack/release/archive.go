package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// NormalizeArchive rewrites the gzipped tar at path so that nothing in it
// depends on when or by whom it was built: every entry's times become
// modTime (the last commit's), owners become 0/0 with no names, and the
// gzip header carries no name or time. Entries, their order, modes and
// contents are kept. `helm package` stamps every entry with the time it
// runs, so without this the chart is the one release artifact that differs
// between two builds of the same commit.
func NormalizeArchive(path string, modTime time.Time) error {
	in, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	zr, err := gzip.NewReader(bytes.NewReader(in))
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	var out bytes.Buffer
	zw, err := gzip.NewWriterLevel(&out, gzip.BestCompression)
	if err != nil {
		return err
	}
	tr, tw := tar.NewReader(zr), tar.NewWriter(zw)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		h.ModTime, h.AccessTime, h.ChangeTime = modTime, time.Time{}, time.Time{}
		h.Uid, h.Gid, h.Uname, h.Gname = 0, 0, "", ""
		h.Format = tar.FormatPAX
		h.PAXRecords = nil
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("%s: %s: %w", path, h.Name, err)
		}
		if _, err := io.Copy(tw, tr); err != nil {
			return fmt.Errorf("%s: %s: %w", path, h.Name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return os.WriteFile(path, out.Bytes(), 0o644)
}
