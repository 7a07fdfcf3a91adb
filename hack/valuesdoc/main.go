// Command valuesdoc regenerates the values reference in the chart's README
// from the "# --" comments in values.yaml (helm-docs style):
//
//	go run ./hack/valuesdoc
//
// charts/valuesdoc_test.go fails when the README is stale.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/webhook-guard/webhook-guard/hack/valuesdoc/valuesdoc"
)

func main() {
	values := flag.String("values", "charts/webhook-guard/values.yaml", "the chart's values.yaml")
	readme := flag.String("readme", "charts/webhook-guard/README.md", "the README holding the reference between its markers")
	flag.Parse()
	if err := run(*values, *readme); err != nil {
		fmt.Fprintln(os.Stderr, "valuesdoc:", err)
		os.Exit(1)
	}
}

func run(valuesPath, readmePath string) error {
	values, err := os.ReadFile(valuesPath)
	if err != nil {
		return err
	}
	readme, err := os.ReadFile(readmePath)
	if err != nil {
		return err
	}
	out, err := valuesdoc.Update(readme, values)
	if err != nil {
		return fmt.Errorf("%s: %w", readmePath, err)
	}
	return os.WriteFile(readmePath, out, 0o644)
}
