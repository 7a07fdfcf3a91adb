// Package docs holds no code: its test keeps the documentation honest. Every
// relative link in the user-facing Markdown must lead to a file (and, for a
// Markdown target, a heading) in the repository, and nothing in the
// repository may point a reader at something outside it.
package docs

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// root is the repository root, relative to this package.
const root = ".."

// linkedPages are the Markdown files whose relative links are checked.
func linkedPages(t *testing.T) []string {
	t.Helper()
	pages := []string{"README.md", "CONTRIBUTING.md", "e2e/README.md", "charts/webhook-guard/README.md"}
	more, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	for _, m := range more {
		rel, err := filepath.Rel(root, m)
		require.NoError(t, err)
		pages = append(pages, filepath.ToSlash(rel))
	}
	return pages
}

var (
	// mdLink matches [text](target) and [text](target "title"); images too.
	mdLink = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	// fence opens or closes a fenced code block.
	fence = regexp.MustCompile("^\\s*(```|~~~)")
	// inlineCode is a code span; links inside it are not links.
	inlineCode = regexp.MustCompile("`[^`]*`")
	// heading is an ATX heading.
	heading = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`)
	// mdLinkText reduces [text](target) in a heading to its text.
	mdLinkText = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
)

// links returns the link targets of a Markdown document outside code.
func links(doc string) []string {
	var out []string
	inFence := false
	for line := range strings.SplitSeq(doc, "\n") {
		if fence.MatchString(line) {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		for _, m := range mdLink.FindAllStringSubmatch(inlineCode.ReplaceAllString(line, ""), -1) {
			out = append(out, m[1])
		}
	}
	return out
}

// anchors returns the heading anchors GitHub generates for a Markdown
// document: lowercase, punctuation other than '-' and '_' dropped, spaces
// turned into '-', and "-1", "-2", ... appended to repeated ones.
func anchors(doc string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	inFence := false
	for line := range strings.SplitSeq(doc, "\n") {
		if fence.MatchString(line) {
			inFence = !inFence
			continue
		}
		m := heading.FindStringSubmatch(line)
		if inFence || m == nil {
			continue
		}
		text := strings.ToLower(mdLinkText.ReplaceAllString(m[2], "$1"))
		var b strings.Builder
		for _, r := range text {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		slug := b.String()
		if n := seen[slug]; n > 0 {
			out[slug+"-"+strconv.Itoa(n)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	return out
}

func Test_relativeLinksResolve(t *testing.T) {
	for _, page := range linkedPages(t) {
		t.Run(page, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(root, page))
			require.NoError(t, err, "the page is listed as documentation but cannot be read")
			var broken []string
			for _, target := range links(string(data)) {
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				path, frag, _ := strings.Cut(target, "#")
				file := filepath.Join(root, filepath.Dir(page), filepath.FromSlash(path))
				if path == "" {
					file = filepath.Join(root, page)
				}
				info, err := os.Stat(file)
				if err != nil {
					broken = append(broken, target+": no such file")
					continue
				}
				if frag == "" || info.IsDir() || !strings.HasSuffix(file, ".md") {
					continue
				}
				doc, err := os.ReadFile(file)
				require.NoError(t, err)
				if !anchors(string(doc))[frag] {
					broken = append(broken, target+": no heading with this anchor")
				}
			}
			assert.Empty(t, broken, "broken links in %s", page)
		})
	}
}

// forbidden are references a reader of the repository cannot follow: the
// project's design notes and issue tracker live outside it. The patterns are
// assembled so that this file does not match them itself.
var forbidden = regexp.MustCompile(strings.Join([]string{
	"DESI" + "GN",
	`(?i:issue) [0-9]`,
	`\.\./sha` + `red`,
	`(?i:section) [0-9]`,
	`\bsee` + `ds/`,
}, "|"))

// docsPath finds mentions of documentation pages in code and charts.
var docsPath = regexp.MustCompile(`\bdocs/[a-z0-9-]+\.md\b`)

// scanned are the kinds of files that carry prose a reader sees.
var scanned = []string{".go", ".md", ".yaml", ".yml", ".tpl", ".txt", ".sh", ".json"}

func Test_noReferencesOutsideTheRepository(t *testing.T) {
	var found, missing []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "bin", ".cache", "node_modules":
				return filepath.SkipDir
			}
			return nil
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return nil // not the repository's own text (a worktree's bin/ may be one)
		}
		// Files without an extension too: Makefile, and the fuzz corpora
		// (copies of the samples).
		if !slices.Contains(scanned, filepath.Ext(path)) && filepath.Ext(path) != "" {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if bytes.IndexByte(data, 0) >= 0 {
			return nil // binary
		}
		rel, _ := filepath.Rel(root, path)
		for i, line := range strings.Split(string(data), "\n") {
			if forbidden.MatchString(line) {
				found = append(found, rel+":"+strconv.Itoa(i+1)+": "+strings.TrimSpace(line))
			}
			for _, p := range docsPath.FindAllString(line, -1) {
				if _, err := os.Stat(filepath.Join(root, p)); err != nil {
					missing = append(missing, rel+":"+strconv.Itoa(i+1)+": "+p)
				}
			}
		}
		return nil
	})
	require.NoError(t, err)
	assert.Empty(t, found, "references to design notes, sections or issues outside the repository: say it in docs/ and point there")
	assert.Empty(t, missing, "mentions of documentation pages that do not exist")
}

// Test_readmeIsAnOverview keeps the README what it is for: what the project
// is, the picture, a quick start and links. Everything else goes in docs/.
func Test_readmeIsAnOverview(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(root, "README.md"))
	require.NoError(t, err)
	lines := strings.Count(string(data), "\n")
	assert.LessOrEqual(t, lines, 200, "README.md has %d lines; move detail into a docs/ page and link it", lines)
	for _, cmd := range []string{"make demo", "make test", "helm install"} {
		assert.Contains(t, string(data), cmd, "the README's quick start must show %q", cmd)
	}
}
