package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type entry struct {
	name string
	mode int64
	body string
}

var chartEntries = []entry{
	{"webhook-guard/Chart.yaml", 0o644, "name: webhook-guard\n"},
	{"webhook-guard/values.yaml", 0o644, "shape: static\n"},
	{"webhook-guard/templates/NOTES.txt", 0o600, "thanks\n"},
}

// writeTGZ writes a gzipped tar as `helm package` does: entries stamped
// with the time it runs and the builder's owner, a gzip header with a time.
func writeTGZ(t *testing.T, path string, at time.Time, uid int) {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.ModTime, zw.Name = at, "webhook-guard-0.1.0.tgz"
	tw := tar.NewWriter(zw)
	for _, e := range chartEntries {
		require.NoError(t, tw.WriteHeader(&tar.Header{Name: e.name, Mode: e.mode, Size: int64(len(e.body)), ModTime: at, Uid: uid, Uname: "builder", Typeflag: tar.TypeReg}))
		_, err := io.WriteString(tw, e.body)
		require.NoError(t, err)
	}
	require.NoError(t, tw.Close())
	require.NoError(t, zw.Close())
	require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o644))
}

func readTGZ(t *testing.T, path string) ([]entry, []*tar.Header) {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	zr, err := gzip.NewReader(f)
	require.NoError(t, err)
	assert.True(t, zr.ModTime.IsZero(), "the gzip header has a time")
	assert.Empty(t, zr.Name, "the gzip header has a name")
	tr := tar.NewReader(zr)
	var es []entry
	var hs []*tar.Header
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		body, err := io.ReadAll(tr)
		require.NoError(t, err)
		es, hs = append(es, entry{h.Name, h.Mode, string(body)}), append(hs, h)
	}
	return es, hs
}

// Test_NormalizeArchive: two builds of the same chart at different times,
// by different users, normalize to the same bytes, with every entry, mode
// and content kept and the commit's time on each entry.
func Test_NormalizeArchive(t *testing.T) {
	dir := t.TempDir()
	epoch := time.Unix(1764547200, 0).UTC()
	a, b := filepath.Join(dir, "a.tgz"), filepath.Join(dir, "b.tgz")
	writeTGZ(t, a, time.Date(2026, 12, 1, 14, 30, 0, 0, time.UTC), 1000)
	writeTGZ(t, b, time.Date(2026, 12, 1, 14, 39, 7, 0, time.UTC), 0)
	require.NoError(t, NormalizeArchive(a, epoch))
	require.NoError(t, NormalizeArchive(b, epoch))

	ab, err := os.ReadFile(a)
	require.NoError(t, err)
	bb, err := os.ReadFile(b)
	require.NoError(t, err)
	assert.Equal(t, ab, bb, "two builds differ after normalizing")

	es, hs := readTGZ(t, a)
	assert.Equal(t, chartEntries, es)
	for _, h := range hs {
		assert.True(t, h.ModTime.Equal(epoch), "%s: mtime %s", h.Name, h.ModTime)
		assert.Equal(t, 0, h.Uid, h.Name)
		assert.Empty(t, h.Uname, h.Name)
	}
}

func Test_NormalizeArchive_notAnArchive(t *testing.T) {
	p := filepath.Join(t.TempDir(), "chart.tgz")
	require.NoError(t, os.WriteFile(p, []byte("not gzip"), 0o644))
	err := NormalizeArchive(p, time.Unix(1, 0))
	require.Error(t, err)
	assert.Contains(t, err.Error(), p)
}
