package main

import (
	"fmt"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// user is the numeric user:group the image runs as. It is the chart's
// podSecurityContext runAsUser/runAsGroup (e2e/image_test.go checks that),
// and numeric so that kubelet can verify runAsNonRoot without reading the
// image's /etc/passwd.
const user = "65532:65532"

// entrypoint is the binary; the chart's containers set only args.
const entrypoint = "/webhook-guard"

// metadata is what the image says about itself.
type metadata struct {
	version  string
	revision string
	source   string
	licenses string // SPDX expression; empty leaves the label out
	created  time.Time
}

// labels are the OCI annotation keys the image config carries as labels
// (and the index as annotations, where registries look for them).
func (m metadata) labels() map[string]string {
	l := map[string]string{
		"org.opencontainers.image.title":    "webhook-guard",
		"org.opencontainers.image.version":  m.version,
		"org.opencontainers.image.revision": m.revision,
		"org.opencontainers.image.source":   m.source,
		"org.opencontainers.image.created":  m.created.Format(time.RFC3339),
	}
	if m.licenses != "" {
		l["org.opencontainers.image.licenses"] = m.licenses
	}
	return l
}

// buildIndex assembles the multi-arch index, one image per platform in
// platforms' order (so the index is the same on every run).
func buildIndex(bins map[platform][]byte, m metadata) (v1.ImageIndex, error) {
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, p := range platforms {
		bin, ok := bins[p]
		if !ok {
			return nil, fmt.Errorf("no binary for %s", p)
		}
		img, err := buildImage(p, bin, m)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add: img,
			Descriptor: v1.Descriptor{
				Platform: &v1.Platform{OS: p.os, Architecture: p.arch, Variant: p.variant},
			},
		})
	}
	idx, ok := mutate.Annotations(idx, m.labels()).(v1.ImageIndex)
	if !ok {
		return nil, fmt.Errorf("annotating the index did not return an index")
	}
	return idx, nil
}

// buildImage is one platform's image: the layer, and a config that runs
// /webhook-guard as the non-root user.
func buildImage(p platform, bin []byte, m metadata) (v1.Image, error) {
	l, err := layer(bin, m.created)
	if err != nil {
		return nil, err
	}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{
		Layer: l,
		History: v1.History{
			Created:   v1.Time{Time: m.created},
			CreatedBy: "hack/image: " + strings.Join(layerFiles, " "),
			Comment:   "webhook-guard " + m.version + " built from " + m.revision,
		},
	})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = p.os, p.arch, p.variant
	cf.Created = v1.Time{Time: m.created}
	cf.Config = v1.Config{
		Entrypoint: []string{entrypoint},
		User:       user,
		WorkingDir: "/",
		Labels:     m.labels(),
	}
	return mutate.ConfigFile(img, cf)
}
