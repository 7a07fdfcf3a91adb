package v1alpha1

import (
	"errors"
	"fmt"
	"strings"

	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// Decode decodes a GuardConfig document (YAML or JSON), neither defaulted
// nor validated. Decoding is strict: an unknown or misspelled field is an
// error naming its path, and a field given twice is an error naming its key
// and line.
func Decode(data []byte) (*GuardConfig, error) {
	if len(strings.TrimSpace(string(data))) == 0 {
		return nil, errors.New("the configuration is empty")
	}
	// Strict: the lenient conversion keeps the last of two equal keys, so a
	// second "writers:" would silently replace the first.
	jsonData, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, fmt.Errorf("not valid YAML: %w", err)
	}
	var spec GuardConfig
	strictErrs, err := sigsjson.UnmarshalStrict(jsonData, &spec, sigsjson.DisallowDuplicateFields, sigsjson.DisallowUnknownFields)
	if err != nil {
		return nil, fmt.Errorf("cannot decode GuardConfig: %w", err)
	}
	if len(strictErrs) > 0 {
		msgs := make([]string, 0, len(strictErrs))
		for _, e := range strictErrs {
			msgs = append(msgs, e.Error())
		}
		return nil, fmt.Errorf("cannot decode GuardConfig: %s", strings.Join(msgs, "; "))
	}
	return &spec, nil
}
