package cmdutil

import (
	"github.com/webhook-guard/webhook-guard/cmd/webhook-guard/internal/offline"
	"github.com/webhook-guard/webhook-guard/webhook"
)

// LoadObjects reads an --objects file (no path: no objects) with the
// guard's scheme, for the commands that resolve CA sources offline; a file
// that does not read is invalid input.
func LoadObjects(path string) (*offline.Objects, error) {
	scheme, err := webhook.NewScheme()
	if err != nil {
		return nil, err
	}
	objects, err := offline.LoadObjects(scheme, path)
	if err != nil {
		return nil, Invalid("%v", err)
	}
	return objects, nil
}
