package framework

// The real CA writers the suite runs from their own modules (see
// cainjector.go and rotator.go).
import (
	_ "github.com/open-policy-agent/cert-controller/pkg/rotator"
)
