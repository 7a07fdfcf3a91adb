package testpki

import (
	"encoding/pem"
	"strings"
)

// WithPEMHeaders re-encodes the first PEM block of pemData with a PEM
// header, which kube-apiserver's AppendCertsFromPEM skips; nil when
// pemData holds no PEM block.
func WithPEMHeaders(pemData []byte) []byte {
	block, _ := pem.Decode(pemData)
	if block == nil {
		return nil
	}
	block.Headers = map[string]string{"Proc-Type": "4,ENCRYPTED"}
	return pem.EncodeToMemory(block)
}

// Indent indents every line of s by n spaces, to embed a PEM bundle in a
// YAML block scalar; a trailing newline is dropped.
func Indent(s string, n int) string {
	pad := strings.Repeat(" ", n)
	return pad + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+pad)
}
