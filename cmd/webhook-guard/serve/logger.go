package serve

import (
	"fmt"
	"strconv"

	"github.com/go-logr/logr"
	"go.uber.org/zap/zapcore"
	ctrlzap "sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// newLogger is the zap logger of --log-format and --log-level.
func newLogger(format, level string) (logr.Logger, error) {
	opts := ctrlzap.Options{}
	switch format {
	case "json":
		opts.Encoder = zapcore.NewJSONEncoder(encoderConfig())
	case "text":
		opts.Encoder = zapcore.NewConsoleEncoder(encoderConfig())
	default:
		return logr.Logger{}, fmt.Errorf("--log-format must be json or text, got %q", format)
	}
	switch level {
	case "info":
		opts.Level = zapcore.InfoLevel
	case "debug":
		opts.Level = zapcore.DebugLevel
	default:
		n, err := strconv.Atoi(level)
		if err != nil || n < 0 || n > 127 {
			return logr.Logger{}, fmt.Errorf("--log-level must be info, debug or a number in 0..127, got %q", level)
		}
		opts.Level = zapcore.Level(-int8(n))
	}
	return ctrlzap.New(ctrlzap.UseFlagOptions(&opts)), nil
}

func encoderConfig() zapcore.EncoderConfig {
	return zapcore.EncoderConfig{
		TimeKey: "ts", LevelKey: "level", NameKey: "logger", MessageKey: "msg", StacktraceKey: "stacktrace",
		LineEnding: zapcore.DefaultLineEnding, EncodeLevel: zapcore.LowercaseLevelEncoder,
		EncodeTime: zapcore.ISO8601TimeEncoder, EncodeDuration: zapcore.StringDurationEncoder,
	}
}
