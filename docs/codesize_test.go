package docs

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// maxProductionLines is CONTRIBUTING's bound on a production file: a file
// past it holds more than one job.
const maxProductionLines = 500

// Test_productionFilesFit: no production Go file is over
// maxProductionLines lines: cmd/, policy/, webhook/, and e2e/framework and
// hack/, which newcomers read to learn how the product is started and
// shown (tests and other nested modules aside). Functions are bounded by
// golangci-lint's funlen and gocyclo (make lint), in the same directories.
func Test_productionFilesFit(t *testing.T) {
	for _, dir := range []string{"cmd", "policy", "webhook", "e2e/framework", "hack"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
					return filepath.SkipDir // a module of its own (test support)
				}
				return nil
			}
			if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			lines := bytes.Count(data, []byte("\n"))
			assert.LessOrEqual(t, lines, maxProductionLines, "%s has %d lines: split it along a seam", path, lines)
			return nil
		})
		require.NoError(t, err)
	}
}
