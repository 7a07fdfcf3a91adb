package testpki

import "encoding/pem"

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
