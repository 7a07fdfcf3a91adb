package staticmanifest

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func Test_Watch(t *testing.T) {
	dir := t.TempDir()
	paths := Paths{Manifest: filepath.Join(dir, "static", "m.yaml"), Admission: filepath.Join(dir, "a.yaml")}
	// Each render's result, in order; the watch ends after the last.
	renders := []struct {
		manifest string
		err      error
	}{{manifest: "one"}, {manifest: "one"}, {err: errors.New("ca.crt is empty")}, {manifest: "two"}}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	calls := 0
	render := func(context.Context) (Rendered, error) {
		r := renders[calls]
		calls++
		if calls == len(renders) {
			cancel()
		}
		return Rendered{Manifest: []byte(r.manifest), Admission: []byte("admission")}, r.err
	}
	var log bytes.Buffer
	require.NoError(t, Watch(ctx, time.Millisecond, &log, paths, render))

	assert.Equal(t, "rendered "+paths.Manifest+"\nrender failed, keeping the previous files: ca.crt is empty\nrendered "+paths.Manifest+"\n", log.String(),
		"an unchanged manifest is not rewritten, a failed render is logged")
	manifest, err := os.ReadFile(paths.Manifest)
	require.NoError(t, err)
	assert.Equal(t, "two", string(manifest))
	admission, err := os.ReadFile(paths.Admission)
	require.NoError(t, err)
	assert.Equal(t, "admission", string(admission))
}
