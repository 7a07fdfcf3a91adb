package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func Test_Check(t *testing.T) {
	story := "\n\nThe story: why, what changes, how it was checked.\n"
	cases := map[string]struct {
		msg  string
		want []string
	}{
		"if the subject is `area: what` and a body follows a blank line, accept it": {
			msg: "metrics: define every series in one file" + story,
		},
		"if the subject is imperative, accept it": {
			msg: "Define every series in one file" + story,
		},
		"if the subject has exactly 72 characters, accept it": {
			msg: strings.Repeat("a", 72) + story,
		},
		"if the subject has 73 characters, reject it": {
			msg:  strings.Repeat("a", 73) + story,
			want: []string{"the subject has 73 characters, more than 72: move the detail to the body"},
		},
		"if the subject counts characters, not bytes, accept 72 of them": {
			msg: strings.Repeat("é", 72) + story,
		},
		"if the subject ends with a period, reject it": {
			msg:  "docs: say how tests run." + story,
			want: []string{"the subject ends with a period"},
		},
		"if text follows the subject without a blank line, reject it": {
			msg:  "docs: say how tests run\nThe story.\n",
			want: []string{"the subject is followed by text, not a blank line"},
		},
		"if there is no body, reject it": {
			msg:  "docs: say how tests run\n",
			want: []string{"there is no body: say why the change is made, what it changes and how it was checked"},
		},
		"if the body is only git's comment lines, reject it": {
			msg:  "docs: say how tests run\n\n# Please enter the commit message\n",
			want: []string{"there is no body: say why the change is made, what it changes and how it was checked"},
		},
		"if the message is empty, reject it": {
			msg:  "\n# comment only\n",
			want: []string{"the message is empty"},
		},
		"if it is a merge commit's message, accept it": {
			msg: "Merge branch 'wt-fresh'\n",
		},
		"if several rules are broken, name each": {
			msg: strings.Repeat("a", 80) + ".\n",
			want: []string{
				"the subject has 81 characters, more than 72: move the detail to the body",
				"the subject ends with a period",
				"there is no body: say why the change is made, what it changes and how it was checked",
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tc.want, Check(tc.msg))
		})
	}
}
