// Command image assembles webhook-guard's multi-arch container image from
// prebuilt static binaries, without Docker or any daemon: an OCI image index
// for linux/amd64 and linux/arm64, each image a single layer holding
// /webhook-guard. It writes an OCI image layout directory, optionally an OCI
// archive of that layout, and optionally pushes the index to a registry.
// `make image` and `make image-push` run it; see the Makefile for the flags
// they pass.
//
// The same binaries, metadata and --source-date-epoch give the same digest:
// nothing in the image depends on the clock or the machine.
//
// It is its own module so that go-containerregistry never becomes a
// dependency of the product module.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

// options are the validated flags.
type options struct {
	// binaries maps each platform to the path of its static binary.
	binaries map[platform]string
	meta     metadata
	// repository is where the image is meant to live; with "v"+version it
	// names the image in the layout, so that importing the archive into a
	// node's containerd yields exactly the image the chart asks for.
	repository string
	ociDir     string
	archive    string
	push       string
}

var (
	versionRE  = regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$`)
	revisionRE = regexp.MustCompile(`^([0-9a-f]{40}|[0-9a-f]{64})(-dirty)?$`)
)

func parseFlags(args []string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	fs.SetOutput(stderr)
	bins := binaryFlag{}
	fs.Var(bins, "binary", "`platform=path` of a static webhook-guard binary; once per platform: linux/amd64 and linux/arm64")
	version := fs.String("version", "", "the version, as in the VERSION file (0.1.0); the tag is \"v\" + version")
	revision := fs.String("revision", "", "the git commit the binaries were built from (git rev-parse HEAD), optionally with -dirty")
	source := fs.String("source", "https://github.com/webhook-guard/webhook-guard", "the source repository URL (org.opencontainers.image.source)")
	licenses := fs.String("licenses", "", "SPDX license expression (org.opencontainers.image.licenses); empty leaves the label out")
	epoch := fs.String("source-date-epoch", os.Getenv("SOURCE_DATE_EPOCH"), "Unix seconds for every timestamp in the image, normally the commit time (git log -1 --format=%ct); defaults to $SOURCE_DATE_EPOCH")
	repository := fs.String("repository", "ghcr.io/webhook-guard/webhook-guard", "the repository the image is named after in the layout (with the tag v<version>)")
	ociDir := fs.String("oci-dir", "", "write the OCI image layout to this directory (replaced if it holds a layout)")
	archive := fs.String("archive", "", "also write the layout as an OCI archive (tar) to this file")
	push := fs.String("push", "", "push the index to this reference (registry/repository:tag); credentials from the Docker config (~/.docker/config.json)")
	if err := fs.Parse(args); err != nil {
		return options{}, err
	}
	if fs.NArg() > 0 {
		return options{}, fmt.Errorf("unexpected arguments %q: everything is a flag", fs.Args())
	}

	o := options{binaries: bins, repository: *repository, ociDir: *ociDir, archive: *archive, push: *push}
	for _, p := range platforms {
		if _, ok := bins[p]; !ok {
			return options{}, fmt.Errorf("--binary %s=<path> is required: the image is built for %s", p, platformList())
		}
	}
	if !versionRE.MatchString(*version) {
		return options{}, fmt.Errorf("--version %q: want the VERSION file's form, such as 0.1.0 (the tag adds the \"v\")", *version)
	}
	if !revisionRE.MatchString(*revision) {
		return options{}, fmt.Errorf("--revision %q: want a full commit hash (git rev-parse HEAD), optionally with -dirty", *revision)
	}
	if *source == "" {
		return options{}, errors.New("--source must not be empty")
	}
	if *epoch == "" {
		return options{}, errors.New("--source-date-epoch (or $SOURCE_DATE_EPOCH) is required: the image's timestamps, so that the same commit gives the same digest; use git log -1 --format=%ct")
	}
	secs, err := strconv.ParseInt(*epoch, 10, 64)
	if err != nil || secs < 0 {
		return options{}, fmt.Errorf("--source-date-epoch %q: want Unix seconds (git log -1 --format=%%ct)", *epoch)
	}
	if _, err := name.NewRepository(*repository); err != nil {
		return options{}, fmt.Errorf("--repository %q: %w", *repository, err)
	}
	if o.ociDir == "" {
		return options{}, errors.New("--oci-dir is required: the OCI image layout is what the archive and a later push are made from")
	}
	if o.push != "" {
		if _, err := name.ParseReference(o.push); err != nil {
			return options{}, fmt.Errorf("--push %q: %w", o.push, err)
		}
	}
	o.meta = metadata{
		version:  *version,
		revision: *revision,
		source:   *source,
		licenses: *licenses,
		created:  time.Unix(secs, 0).UTC(),
	}
	return o, nil
}

// binaryFlag collects repeated --binary platform=path flags.
type binaryFlag map[platform]string

func (b binaryFlag) String() string {
	var s []string
	for p, path := range b {
		s = append(s, p.String()+"="+path)
	}
	return strings.Join(s, ",")
}

func (b binaryFlag) Set(v string) error {
	plat, path, ok := strings.Cut(v, "=")
	if !ok || path == "" {
		return fmt.Errorf("want platform=path, such as linux/amd64=bin/image/linux_amd64/webhook-guard")
	}
	for _, p := range platforms {
		if p.String() == plat {
			if _, dup := b[p]; dup {
				return fmt.Errorf("%s given twice", plat)
			}
			b[p] = path
			return nil
		}
	}
	return fmt.Errorf("unsupported platform %q: want one of %s", plat, platformList())
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	bins := map[platform][]byte{}
	for _, p := range platforms {
		b, err := readBinary(o.binaries[p], p)
		if err != nil {
			return fmt.Errorf("--binary %s=%s: %w", p, o.binaries[p], err)
		}
		bins[p] = b
	}
	idx, err := buildIndex(bins, o.meta)
	if err != nil {
		return err
	}
	if err := describe(stdout, idx, o.meta); err != nil {
		return err
	}
	ref := o.repository + ":v" + o.meta.version
	if err := writeLayout(o.ociDir, idx, ref, "v"+o.meta.version); err != nil {
		return fmt.Errorf("--oci-dir %s: %w", o.ociDir, err)
	}
	fmt.Fprintf(stdout, "wrote OCI layout %s (image %s)\n", o.ociDir, ref)
	if o.archive != "" {
		if err := writeArchive(o.ociDir, o.archive, o.meta.created); err != nil {
			return fmt.Errorf("--archive %s: %w", o.archive, err)
		}
		fmt.Fprintf(stdout, "wrote OCI archive %s\n", o.archive)
	}
	if o.push != "" {
		digest, err := push(ctx, idx, o.push)
		if err != nil {
			return fmt.Errorf("--push %s: %w", o.push, err)
		}
		fmt.Fprintf(stdout, "pushed %s@%s\n", o.push, digest)
	}
	return nil
}

// describe prints the digests and layer sizes, the numbers worth quoting.
func describe(w io.Writer, idx v1.ImageIndex, m metadata) error {
	digest, err := idx.Digest()
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "index %s: webhook-guard %s, revision %s, created %s\n", digest, m.version, m.revision, m.created.Format(time.RFC3339))
	im, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	for _, desc := range im.Manifests {
		img, err := idx.Image(desc.Digest)
		if err != nil {
			return err
		}
		layers, err := img.Layers()
		if err != nil {
			return err
		}
		var size int64
		for _, l := range layers {
			s, err := l.Size()
			if err != nil {
				return err
			}
			size += s
		}
		fmt.Fprintf(w, "  %s/%s: manifest %s, layer %d bytes compressed (%.1f MiB)\n",
			desc.Platform.OS, desc.Platform.Architecture, desc.Digest, size, float64(size)/(1<<20))
	}
	return nil
}
