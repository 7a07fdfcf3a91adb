package casource

import (
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// getError wraps a GET failure. NotFound and Forbidden are answers about the
// source (definitive); anything else (timeouts, connection refused) means
// the API could not be asked, and a recent cached answer may still serve.
func getError(desc string, err error) error {
	switch {
	case apierrors.IsNotFound(err):
		return &SourceError{Source: desc, Reason: "it does not exist", Definitive: true, NotFound: true}
	case apierrors.IsForbidden(err):
		return &SourceError{Source: desc, Reason: "the guard may not read it (" + err.Error() + "); grant get, list and watch on it (by name) in the chart's values", Definitive: true}
	}
	return &SourceError{Source: desc, Reason: err.Error()}
}
