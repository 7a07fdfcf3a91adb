package render

import (
	"fmt"
	"io"
	"regexp"
	"strings"

	admv1 "k8s.io/api/admissionregistration/v1"

	"github.com/webhook-guard/webhook-guard/policy/vap"
	"github.com/webhook-guard/webhook-guard/policy/vap/celfmt"
)

// printExplanation prints, as YAML comments before policy p (so that the
// stream still applies), each of its matchConditions, variables and
// validations: the guarantee it enforces and its CEL laid out for a
// reader, long base64 literals (a CA's text) cut short.
func printExplanation(out io.Writer, p *admv1.ValidatingAdmissionPolicy) error {
	fmt.Fprintf(out, "# %s: what each expression enforces\n", p.Name)
	for _, e := range vap.Explain(p) {
		laidOut, err := celfmt.Format(e.Expression, 0)
		if err != nil {
			return fmt.Errorf("%s: %s %s: %w", p.Name, e.Field, e.Name, err)
		}
		fmt.Fprintf(out, "#\n# %s/%s\n", e.Field, e.Name)
		for _, l := range wrap(e.Guarantee, 74) {
			fmt.Fprintf(out, "#   %s\n", l)
		}
		for l := range strings.SplitSeq(elideLiterals(laidOut), "\n") {
			fmt.Fprintf(out, "#     %s\n", l)
		}
	}
	return nil
}

// longLiteral is a string literal of base64 text long enough to be a
// certificate's: the explanation shows its start and its length.
var longLiteral = regexp.MustCompile(`"([A-Za-z0-9+/]{24})[A-Za-z0-9+/]{40,}={0,2}"`)

func elideLiterals(s string) string {
	return longLiteral.ReplaceAllStringFunc(s, func(lit string) string {
		return fmt.Sprintf(`"%s…" (%d characters)`, lit[1:25], len(lit)-2)
	})
}

// wrap breaks text into lines of at most width characters at spaces.
func wrap(text string, width int) []string {
	var lines []string
	line := ""
	for w := range strings.FieldsSeq(text) {
		if line != "" && len(line)+1+len(w) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += w
	}
	return append(lines, line)
}
