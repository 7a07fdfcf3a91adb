package main

import (
	"fmt"
	"strings"
)

// MaxSubject is the longest subject line: what `git log --oneline`, GitHub
// and most terminals show without cutting it.
const MaxSubject = 72

// Check returns what is wrong with a commit message, by the convention in
// CONTRIBUTING.md: a subject of at most MaxSubject characters with no
// trailing period, a blank line, and a body that tells the story. Merge
// commits, whose message git writes, are exempt. Lines git strips
// (comments starting with '#') are ignored.
func Check(msg string) []string {
	var lines []string
	for l := range strings.SplitSeq(strings.ReplaceAll(msg, "\r\n", "\n"), "\n") {
		if !strings.HasPrefix(l, "#") {
			lines = append(lines, strings.TrimRight(l, " \t"))
		}
	}
	for len(lines) > 0 && lines[0] == "" {
		lines = lines[1:]
	}
	if len(lines) == 0 {
		return []string{"the message is empty"}
	}
	subject := lines[0]
	if strings.HasPrefix(subject, "Merge ") {
		return nil
	}
	var problems []string
	if n := len([]rune(subject)); n > MaxSubject {
		problems = append(problems, fmt.Sprintf("the subject has %d characters, more than %d: move the detail to the body", n, MaxSubject))
	}
	if strings.HasSuffix(subject, ".") {
		problems = append(problems, "the subject ends with a period")
	}
	body := lines[1:]
	switch {
	case len(body) > 0 && body[0] != "":
		problems = append(problems, "the subject is followed by text, not a blank line")
	case strings.TrimSpace(strings.Join(body, "")) == "":
		problems = append(problems, "there is no body: say why the change is made, what it changes and how it was checked")
	}
	return problems
}
