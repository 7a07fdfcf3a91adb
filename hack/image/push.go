package main

import (
	"context"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// push uploads the index, its images and their blobs to ref and returns the
// index digest. Credentials come from the Docker config (~/.docker/config.json
// or $DOCKER_CONFIG, credential helpers included): what `docker login`,
// `crane auth login` and docker/login-action write.
func push(ctx context.Context, idx v1.ImageIndex, ref string) (v1.Hash, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return v1.Hash{}, err
	}
	if err := remote.WriteIndex(r, idx,
		remote.WithContext(ctx),
		remote.WithAuthFromKeychain(authn.DefaultKeychain),
		remote.WithUserAgent("webhook-guard-hack-image"),
	); err != nil {
		return v1.Hash{}, err
	}
	return idx.Digest()
}
