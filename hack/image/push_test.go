package main

import (
	"io"
	"log"
	"maps"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Test_pushThenPull pushes the index to an in-process registry and pulls it
// back the way a kubelet would: by tag, then per platform.
func Test_pushThenPull(t *testing.T) {
	// No credentials from the machine's Docker config; the registry is open.
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)

	m := metadata{version: "0.1.0", revision: testRevision, source: "https://example.com/webhook-guard", created: time.Unix(1700000000, 0).UTC()}
	idx, err := buildIndex(map[platform][]byte{platforms[0]: []byte("amd64 guard"), platforms[1]: []byte("arm64 guard")}, m)
	if err != nil {
		t.Fatal(err)
	}
	ref := strings.TrimPrefix(srv.URL, "http://") + "/webhook-guard/webhook-guard:v0.1.0"
	pushed, err := push(t.Context(), idx, ref)
	if err != nil {
		t.Fatal(err)
	}

	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	pulled, err := remote.Index(r, remote.WithContext(t.Context()))
	if err != nil {
		t.Fatal(err)
	}
	if d, err := pulled.Digest(); err != nil || d != pushed {
		t.Fatalf("pulled index digest %s (%v), pushed %s", d, err, pushed)
	}
	im, err := pulled.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	wantLabels := map[string]string{
		"org.opencontainers.image.title":    "webhook-guard",
		"org.opencontainers.image.version":  "0.1.0",
		"org.opencontainers.image.revision": testRevision,
		"org.opencontainers.image.source":   "https://example.com/webhook-guard",
		"org.opencontainers.image.created":  "2023-11-14T22:13:20Z",
	}
	if !maps.Equal(im.Annotations, wantLabels) {
		t.Errorf("index annotations = %v, want %v", im.Annotations, wantLabels)
	}
	var got []string
	for _, desc := range im.Manifests {
		p := desc.Platform.OS + "/" + desc.Platform.Architecture
		got = append(got, p)
		img, err := pulled.Image(desc.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cf.OS+"/"+cf.Architecture != p {
			t.Errorf("%s: config says %s/%s", p, cf.OS, cf.Architecture)
		}
		if cf.Config.User != "65532:65532" {
			t.Errorf("%s: user %q, want 65532:65532", p, cf.Config.User)
		}
		if !slices.Equal(cf.Config.Entrypoint, []string{"/webhook-guard"}) || len(cf.Config.Cmd) != 0 {
			t.Errorf("%s: entrypoint %q cmd %q, want [/webhook-guard] and no cmd", p, cf.Config.Entrypoint, cf.Config.Cmd)
		}
		if !maps.Equal(cf.Config.Labels, wantLabels) {
			t.Errorf("%s: labels %v, want %v", p, cf.Config.Labels, wantLabels)
		}
		if !cf.Created.Equal(m.created) {
			t.Errorf("%s: created %s, want %s", p, cf.Created.Time, m.created)
		}
		layers, err := img.Layers()
		if err != nil || len(layers) != 1 {
			t.Fatalf("%s: %d layers (%v), want 1", p, len(layers), err)
		}
	}
	if want := []string{"linux/amd64", "linux/arm64"}; !slices.Equal(got, want) {
		t.Errorf("platforms %v, want %v", got, want)
	}
}
