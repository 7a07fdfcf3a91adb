// Command release finishes `make release` in --dir: it makes the chart
// archive `helm package` wrote reproducible (NormalizeArchive), then writes
// the metadata next to the artifacts: the krew plugin manifest (from the
// kubectl-webhook_guard archives), an SPDX 2.3 JSON SBOM (from the module
// graph recorded in the linux/amd64 binary: what is really linked in, no
// downloads) and SHA256SUMS over every file. Everything is derived from the
// artifacts and --source-date-epoch, so a rebuild writes the same bytes.
//
//	go run ./hack/release --dir bin/release --version 0.1.0 --source-date-epoch 1764547200
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

func main() {
	dir := flag.String("dir", "bin/release", "directory holding the built artifacts; the metadata is written there")
	version := flag.String("version", "", "release version without the v (the VERSION file)")
	repo := flag.String("repo", "webhook-guard/webhook-guard", "GitHub owner/name the release assets are downloaded from")
	epoch := flag.Int64("source-date-epoch", 0, "creation time of the SBOM and of the chart archive's entries, seconds since 1970 (the last commit's time)")
	flag.Parse()
	if *version == "" || *epoch <= 0 {
		fmt.Fprintln(os.Stderr, "error: --version and --source-date-epoch are required")
		os.Exit(2)
	}
	if err := run(*dir, *version, *repo, time.Unix(*epoch, 0).UTC()); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func run(dir, version, repo string, created time.Time) error {
	if err := NormalizeArchive(filepath.Join(dir, "webhook-guard-"+version+".tgz"), created); err != nil {
		return err
	}
	krew, err := KrewManifest(dir, version, repo)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "webhook-guard.krew.yaml"), krew, 0o644); err != nil {
		return err
	}
	sbom, err := SBOM(filepath.Join(dir, "webhook-guard_linux_amd64"), version, created)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "webhook-guard.spdx.json"), sbom, 0o644); err != nil {
		return err
	}
	sums, err := Checksums(dir)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, ChecksumsFile), sums, 0o644)
}
