package vap

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
)

// The pieces of CEL that read the request: what it is about and who makes
// it. Both shapes use them (the static webhook's matchConditions too).

// RequestName is CEL for the name of the object the request is about (the
// static webhook's matchConditions use it too). CEL's
// request is built from an AdmissionRequest whose name is omitted when empty,
// and reading an absent field is an error that fails the request whatever
// the mapping: a deletecollection carries no name (each object it deletes is
// admitted with oldObject), a generateName CREATE may carry none. So the name
// comes from request.name when present, else from object (CREATE, UPDATE)
// or oldObject (DELETE), each field read only after has() said it is there.
const RequestName = `(has(request.name) && request.name != "" ? request.name : ` +
	`object != null && has(object.metadata) && has(object.metadata.name) ? object.metadata.name : ` +
	`oldObject != null && has(oldObject.metadata) && has(oldObject.metadata.name) ? oldObject.metadata.name : "")`

// namesOfKind is CEL for the names a mapping claims of one kind: the
// list when the request is of that kind, else the empty list.
func namesOfKind(kind string, names []string) string {
	return fmt.Sprintf(`request.kind.kind == %s ? %s : `, CELString(kind), celList(names))
}

// ownedName is the owned-configuration matchCondition: the request's name
// (read once) is one of the names of its kind (namesOfKind, chained).
func ownedName(ofKinds []string) string {
	return RequestName + ` in (` + strings.Join(ofKinds, "") + `[])`
}

// requestUser is the request's username; userInfo fields are omitempty too.
const requestUser = `(has(request.userInfo.username) ? request.userInfo.username : "")`

// SubjectsExpression is CEL that is true for the subjects, matched exactly
// (whole usernames, whole groups), as policy matches them. Lists are JSON
// arrays of strings: valid CEL list literals with correct escaping. The
// static webhook's matchConditions use it too.
func SubjectsExpression(s guardapi.Subjects) (string, bool) {
	users := slices.Clone(s.Users)
	for _, sa := range s.ServiceAccounts {
		users = append(users, guardapi.ServiceAccountUsername(sa))
	}
	slices.Sort(users)
	users = slices.Compact(users)
	groups := slices.Compact(slices.Sorted(slices.Values(s.Groups)))
	var parts []string
	// userInfo's fields are omitempty: read each only after has().
	if len(users) > 0 {
		parts = append(parts, "(has(request.userInfo.username) && request.userInfo.username in "+celList(users)+")")
	}
	if len(groups) > 0 {
		parts = append(parts, "(has(request.userInfo.groups) && request.userInfo.groups.exists(g, g in "+celList(groups)+"))")
	}
	if len(parts) == 0 {
		return "", false
	}
	return strings.Join(parts, " || "), true
}

func celList(ss []string) string {
	b, _ := json.Marshal(ss) //nolint:errchkjson // a []string always encodes
	return string(b)
}

// CELString is s as a CEL string literal (JSON escaping is valid CEL).
func CELString(s string) string {
	b, _ := json.Marshal(s) //nolint:errchkjson // a string always encodes
	return string(b)
}
