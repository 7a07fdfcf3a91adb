package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/webhook-guard/webhook-guard/e2e/framework"
)

// A reader of the OCI image layout `make image` writes, with the standard
// library only: hack/image writes the layout with go-containerregistry, and
// reading it back with the same library would not notice that library's
// mistakes. It follows the image-spec (index.json -> image index -> image
// manifests -> config and layer blobs) and verifies every digest, size and
// diff_id, as containerd does when it imports and unpacks an image.

const (
	ociIndexType    = "application/vnd.oci.image.index.v1+json"
	ociManifestType = "application/vnd.oci.image.manifest.v1+json"
	ociConfigType   = "application/vnd.oci.image.config.v1+json"
	ociLayerType    = "application/vnd.oci.image.layer.v1.tar+gzip"
)

type ociDescriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations"`
	Platform    *struct {
		OS           string `json:"os"`
		Architecture string `json:"architecture"`
		Variant      string `json:"variant"`
	} `json:"platform"`
}

type ociIndex struct {
	SchemaVersion int             `json:"schemaVersion"`
	MediaType     string          `json:"mediaType"`
	Manifests     []ociDescriptor `json:"manifests"`
}

type ociManifest struct {
	SchemaVersion int             `json:"schemaVersion"`
	MediaType     string          `json:"mediaType"`
	Config        ociDescriptor   `json:"config"`
	Layers        []ociDescriptor `json:"layers"`
}

type ociConfig struct {
	OS           string `json:"os"`
	Architecture string `json:"architecture"`
	Config       struct {
		User       string            `json:"User"`
		Entrypoint []string          `json:"Entrypoint"`
		Cmd        []string          `json:"Cmd"`
		WorkingDir string            `json:"WorkingDir"`
		Labels     map[string]string `json:"Labels"`
	} `json:"config"`
	RootFS struct {
		Type    string   `json:"type"`
		DiffIDs []string `json:"diff_ids"`
	} `json:"rootfs"`
}

// ociImage is one platform's image.
type ociImage struct {
	platform string // os/arch
	config   ociConfig
	layers   [][]byte // uncompressed tars, in order
}

// imageLayoutDir is bin/image/oci; the test fails (never skips) without it.
func imageLayoutDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(framework.RepoRoot(), "bin", "image", "oci")
	if _, err := os.Stat(filepath.Join(dir, "index.json")); err != nil {
		t.Fatalf("%s is missing: run make image (it builds the image without Docker; make test does it first): %v", dir, err)
	}
	return dir
}

// readImageLayout returns index.json's one entry (the image index, with the
// name annotations) and the images of that index.
func readImageLayout(t *testing.T, dir string) (ociDescriptor, []ociImage) {
	t.Helper()
	var top ociIndex
	readJSON(t, filepath.Join(dir, "index.json"), &top)
	if len(top.Manifests) != 1 || top.Manifests[0].MediaType != ociIndexType {
		t.Fatalf("%s/index.json: want one %s entry, got %+v (run make image)", dir, ociIndexType, top.Manifests)
	}
	var idx ociIndex
	if err := json.Unmarshal(readBlob(t, dir, top.Manifests[0], ociIndexType), &idx); err != nil {
		t.Fatal(err)
	}
	var images []ociImage
	for _, md := range idx.Manifests {
		if md.Platform == nil {
			t.Fatalf("index entry %s has no platform", md.Digest)
		}
		var m ociManifest
		if err := json.Unmarshal(readBlob(t, dir, md, ociManifestType), &m); err != nil {
			t.Fatal(err)
		}
		img := ociImage{platform: md.Platform.OS + "/" + md.Platform.Architecture}
		if err := json.Unmarshal(readBlob(t, dir, m.Config, ociConfigType), &img.config); err != nil {
			t.Fatal(err)
		}
		if img.config.RootFS.Type != "layers" || len(img.config.RootFS.DiffIDs) != len(m.Layers) {
			t.Fatalf("%s: rootfs %+v does not match %d layers", img.platform, img.config.RootFS, len(m.Layers))
		}
		for i, ld := range m.Layers {
			zr, err := gzip.NewReader(bytes.NewReader(readBlob(t, dir, ld, ociLayerType)))
			if err != nil {
				t.Fatalf("%s layer %s: %v", img.platform, ld.Digest, err)
			}
			tarBytes, err := io.ReadAll(zr)
			if err != nil {
				t.Fatalf("%s layer %s: %v", img.platform, ld.Digest, err)
			}
			if got := sha256Digest(tarBytes); got != img.config.RootFS.DiffIDs[i] {
				t.Fatalf("%s layer %s: uncompressed digest %s, config's diff_id %s", img.platform, ld.Digest, got, img.config.RootFS.DiffIDs[i])
			}
			img.layers = append(img.layers, tarBytes)
		}
		images = append(images, img)
	}
	return top.Manifests[0], images
}

// readBlob reads a descriptor's blob and checks its media type, size and digest.
func readBlob(t *testing.T, dir string, d ociDescriptor, mediaType string) []byte {
	t.Helper()
	if d.MediaType != mediaType {
		t.Fatalf("blob %s has media type %q, want %q", d.Digest, d.MediaType, mediaType)
	}
	hexDigest, ok := strings.CutPrefix(d.Digest, "sha256:")
	if !ok {
		t.Fatalf("blob digest %q is not sha256", d.Digest)
	}
	b, err := os.ReadFile(filepath.Join(dir, "blobs", "sha256", hexDigest))
	if err != nil {
		t.Fatalf("%v (run make image)", err)
	}
	if int64(len(b)) != d.Size || sha256Digest(b) != d.Digest {
		t.Fatalf("blob %s: the file has %d bytes and digest %s, the descriptor says %d bytes and %s (run make image)", hexDigest, len(b), sha256Digest(b), d.Size, d.Digest)
	}
	return b
}

func readJSON(t *testing.T, file string, v any) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}

func sha256Digest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// imageFile returns the header and content of the file at name (absolute,
// as in the container) from the topmost layer that has it.
func imageFile(t *testing.T, img ociImage, name string) (*tar.Header, []byte) {
	t.Helper()
	var hdr *tar.Header
	var body []byte
	eachLayerEntry(t, img, func(n string, h *tar.Header, r io.Reader) error {
		if n != name {
			return nil
		}
		b, err := io.ReadAll(r)
		hdr, body = h, b
		return err
	})
	if hdr == nil {
		t.Fatalf("%s: the image has no %s", img.platform, name)
	}
	return hdr, body
}

// extractRootFS unpacks the image's layers into a new directory, as a
// container runtime would (directories and regular files with their modes:
// all this image holds), and returns it.
func extractRootFS(t *testing.T, img ociImage) string {
	t.Helper()
	root := t.TempDir()
	eachLayerEntry(t, img, func(name string, hdr *tar.Header, r io.Reader) error {
		target := filepath.Join(root, filepath.FromSlash(name))
		switch hdr.Typeflag {
		case tar.TypeDir:
			return os.MkdirAll(target, fs.FileMode(hdr.Mode).Perm()|0o700)
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			b, err := io.ReadAll(r)
			if err != nil {
				return err
			}
			return os.WriteFile(target, b, fs.FileMode(hdr.Mode).Perm())
		default:
			return fmt.Errorf("%s has tar type %q; the image holds only directories and regular files", name, hdr.Typeflag)
		}
	})
	return root
}

// eachLayerEntry calls fn with every entry of the image's layers, bottom
// layer first, and the entry's path cleaned to an absolute one inside the
// image (so ../ cannot leave it).
func eachLayerEntry(t *testing.T, img ociImage, fn func(name string, hdr *tar.Header, r io.Reader) error) {
	t.Helper()
	for i, layer := range img.layers {
		tr := tar.NewReader(bytes.NewReader(layer))
		for {
			hdr, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err == nil {
				err = fn(path.Clean("/"+hdr.Name), hdr, tr)
			}
			if err != nil {
				t.Fatalf("%s layer %d: %v", img.platform, i, err)
			}
		}
	}
}
