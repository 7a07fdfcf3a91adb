package valuesdoc

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func Test_Rows(t *testing.T) {
	tests := map[string]struct {
		values string
		want   []Row
		err    string
	}{
		"if a map's keys are documented, list its leaves under dotted keys": {
			values: "# -- Section.\ntls:\n  # -- Lifetime,\n  # a Go duration.\n  duration: 2160h\n  # -- Keys | kept.\n  keep: [1, 2]\n",
			want: []Row{
				{Key: "tls.duration", Type: "string", Default: `"2160h"`, Description: "Lifetime, a Go duration."},
				{Key: "tls.keep", Type: "list", Default: "[1,2]", Description: "Keys | kept."},
			},
		},
		"if a map's keys are data, list the map as one value": {
			values: "# A file header.\n\n# -- Node selector.\nnodeSelector:\n  kubernetes.io/os: linux\n",
			want:   []Row{{Key: "nodeSelector", Type: "object", Default: `{"kubernetes.io/os":"linux"}`, Description: "Node selector."}},
		},
		"if a setting has no -- comment, name it and its line": {
			values: "# -- Documented.\na: 1\n# plain comment\nb: true\n",
			err:    `values.yaml line 4: b has no "# --" comment`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := Rows([]byte(tc.values))
			if tc.err != "" {
				require.EqualError(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func Test_Table(t *testing.T) {
	got := Table([]Row{{Key: "a", Type: "string", Default: `"x|y"`, Description: "One | two."}})
	assert.Equal(t, "| Key | Type | Default | Description |\n|-----|------|---------|-------------|\n| `a` | string | `\"x\\|y\"` | One \\| two. |\n", got)
}

func Test_Update(t *testing.T) {
	readme := "# Chart\n\n" + BeginMarker + "\nold\n" + EndMarker + "\n\nrest\n"
	got, err := Update([]byte(readme), []byte("# -- A.\na: 1\n"))
	require.NoError(t, err)
	assert.Equal(t, "# Chart\n\n"+BeginMarker+"\n\n| Key | Type | Default | Description |\n|-----|------|---------|-------------|\n| `a` | int | `1` | A. |\n\n"+EndMarker+"\n\nrest\n", string(got))

	_, err = Update([]byte("# Chart\n"), []byte("# -- A.\na: 1\n"))
	require.ErrorContains(t, err, "are missing or out of order")
}
