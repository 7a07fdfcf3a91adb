// Command commitmsg checks commit messages against the convention in
// CONTRIBUTING.md (Check). As a commit-msg hook it checks the message file
// git passes:
//
//	ln -s ../../hack/commitmsg/hook.sh .git/hooks/commit-msg
//
// With --range it checks every commit of a revision range, as
// `make check-commits` does for the commits not yet on main.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

func main() {
	rng := flag.String("range", "", "check every commit in this git revision range (e.g. main..HEAD) instead of a message file")
	flag.Parse()
	if err := run(context.Background(), *rng, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(ctx context.Context, rng string, args []string) error {
	if rng != "" {
		return checkRange(ctx, rng)
	}
	if len(args) != 1 {
		return fmt.Errorf("usage: commitmsg MESSAGE_FILE | commitmsg --range A..B")
	}
	msg, err := os.ReadFile(args[0])
	if err != nil {
		return err
	}
	if problems := Check(string(msg)); len(problems) > 0 {
		return fmt.Errorf("commit message (see CONTRIBUTING.md, Commits):\n  %s", strings.Join(problems, "\n  "))
	}
	return nil
}

// checkRange checks the message of every commit in rng.
func checkRange(ctx context.Context, rng string) error {
	out, err := exec.CommandContext(ctx, "git", "log", "--format=%H%x00%B%x00", rng).Output()
	if err != nil {
		return fmt.Errorf("git log %s: %w", rng, err)
	}
	fields := strings.Split(string(out), "\x00")
	var failed []string
	for i := 0; i+1 < len(fields); i += 2 {
		hash := strings.TrimSpace(fields[i])
		if problems := Check(fields[i+1]); len(problems) > 0 {
			subject, _, _ := strings.Cut(strings.TrimSpace(fields[i+1]), "\n")
			failed = append(failed, fmt.Sprintf("%.12s %s\n  %s", hash, subject, strings.Join(problems, "\n  ")))
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("commit messages in %s (see CONTRIBUTING.md, Commits):\n%s", rng, strings.Join(failed, "\n"))
	}
	return nil
}
