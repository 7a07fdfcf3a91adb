package probe

import (
	"context"
	"errors"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/webhook-guard/webhook-guard/webhook/servedchain"
)

// What the probe publishes (the report, the log, admission's warnings)
// comes partly from what the endpoints and the objects' writers chose: an
// x509 error lists every name the served certificate holds, a URL is as
// long as its writer likes. Each such text is cut here, and its control
// and invisible characters replaced, before it leaves a round.
const (
	// maxErrText bounds a probe error's text.
	maxErrText = 256
	// maxWhereText bounds a URL, an endpoint or a server name in a message.
	maxWhereText = 128
)

// boundText is s with every character that is not a printable one
// replaced by '?', cut to at most n bytes (on a character boundary) and
// marked "..." when cut.
func boundText(s string, n int) string {
	clean := strings.Map(func(r rune) rune {
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			return '?'
		}
		return r
	}, s)
	if len(clean) <= n {
		return clean
	}
	cut := n - len("...")
	for cut > 0 && !utf8.RuneStart(clean[cut]) {
		cut--
	}
	return clean[:cut] + "..."
}

// probeError is a probe's error as the round keeps it: its text, bounded,
// and whether it was a deadline. It holds nothing of the chain the error
// may have named (x509's errors keep the certificate).
type probeError struct {
	text     string
	deadline bool
}

func (e *probeError) Error() string { return e.text }

// Unwrap lets errors.Is find a deadline.
func (e *probeError) Unwrap() error {
	if e.deadline {
		return context.DeadlineExceeded
	}
	return nil
}

// boundedDetail is a verification's error as the round keeps it, saying
// when the system roots were used (servedchain.Result.Detail); nil when
// verified.
func boundedDetail(res servedchain.Result) error {
	if res.Err == nil {
		return nil
	}
	return &probeError{text: boundText(res.Detail(), maxErrText)}
}

// bounded is err as a probeError; nil for nil.
func bounded(err error) error {
	if err == nil {
		return nil
	}
	return &probeError{text: boundText(err.Error(), maxErrText), deadline: errors.Is(err, context.DeadlineExceeded)}
}
