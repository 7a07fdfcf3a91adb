package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's /etc/passwd and /etc/group name the non-root user (user), so
// that tools inside or around the container (ps, kubectl debug) show a name.
// The guard itself never reads them, and kubelet checks runAsNonRoot against
// the numeric user.
const (
	passwd = "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/:/sbin/nologin\n"
	group  = "root:x:0:\nnonroot:x:65532:\n"
)

// layerFiles are the files of the layer, for the image's history.
var layerFiles = []string{entrypoint, "/etc/passwd", "/etc/group"}

// layer is the image's single layer: the binary at /webhook-guard (0555,
// root-owned, so the non-root user can run it but not replace it), /etc/passwd
// and /etc/group. Every entry has the same owner, mode and mtime on every
// run, so the layer's digest depends only on the binary and created.
func layer(bin []byte, created time.Time) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	entries := []struct {
		name string
		mode int64
		body []byte
	}{
		{"etc/", 0o755, nil},
		{"etc/group", 0o444, []byte(group)},
		{"etc/passwd", 0o444, []byte(passwd)},
		{entrypoint[1:], 0o555, bin},
	}
	for _, e := range entries {
		hdr := &tar.Header{
			Name:    e.name,
			Mode:    e.mode,
			Uid:     0,
			Gid:     0,
			ModTime: created,
		}
		if e.body == nil {
			hdr.Typeflag = tar.TypeDir
		} else {
			hdr.Typeflag = tar.TypeReg
			hdr.Size = int64(len(e.body))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.body); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	tarBytes := buf.Bytes()
	return tarball.LayerFromOpener(
		func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(tarBytes)), nil },
		tarball.WithMediaType(types.OCILayer),
		// The layer is pulled once per node; smaller beats faster to build.
		tarball.WithCompressionLevel(gzip.BestCompression),
	)
}
