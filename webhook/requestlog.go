package webhook

import (
	"context"

	"github.com/go-logr/logr"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

type requestFieldsKey struct{}

// withRequestFields records the key/value pairs that identify an admission
// request, for whatever log lines handling it writes. They are joined to the
// logger only when a line is written (requestLog): zap encodes WithValues
// eagerly, and doing that for every review cost ~14 µs on the hot path,
// where most reviews are allowed and log nothing at the default level.
func withRequestFields(ctx context.Context, kv ...any) context.Context {
	return context.WithValue(ctx, requestFieldsKey{}, kv)
}

// requestLog is the logger in ctx with the request's fields.
func requestLog(ctx context.Context) logr.Logger {
	log := logf.FromContext(ctx)
	if kv, ok := ctx.Value(requestFieldsKey{}).([]any); ok {
		log = log.WithValues(kv...)
	}
	return log
}
