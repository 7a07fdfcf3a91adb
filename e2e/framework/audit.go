package framework

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// configureAuditLog has kube-apiserver write the audit log of users' requests
// (AuditEvents reads it), blocking, so a test reads what it just did.
func (e *Env) configureAuditLog(t testing.TB, api *envtest.APIServer, users []string) {
	t.Helper()
	policyPath := filepath.Join(e.Dir, "audit-policy.yaml")
	if err := os.WriteFile(policyPath, []byte(auditPolicyFor(users)), 0o600); err != nil {
		t.Fatal(err)
	}
	e.auditLogPath = filepath.Join(e.Dir, "audit.log")
	api.Configure().Set("audit-policy-file", policyPath)
	api.Configure().Set("audit-log-path", e.auditLogPath)
	api.Configure().Set("audit-log-mode", "blocking")
}

// auditPolicyFor records writes of the guarded kinds at Metadata level
// (which carries admission webhooks' auditAnnotations), those of users at
// Request level (with the object they sent), and nothing else.
func auditPolicyFor(users []string) string {
	if len(users) == 0 {
		return auditPolicy
	}
	quoted := make([]string, len(users))
	for i, u := range users {
		quoted[i] = strconv.Quote(u)
	}
	return strings.Replace(auditPolicy, "rules:\n", `rules:
- level: Request
  users: [`+strings.Join(quoted, ", ")+`]
`+auditedResources, 1)
}

// AuditEvent is the part of a kube-apiserver audit event the tests read.
type AuditEvent struct {
	Verb      string `json:"verb"`
	Stage     string `json:"stage"`
	UserAgent string `json:"userAgent"`
	User      struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef struct {
		Resource string `json:"resource"`
		Name     string `json:"name"`
	} `json:"objectRef"`
	ResponseStatus struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"responseStatus"`
	RequestReceivedTimestamp metav1.MicroTime  `json:"requestReceivedTimestamp"`
	Annotations              map[string]string `json:"annotations"`
	// RequestObject is the object the request sent (Options.AuditRequestsOf).
	RequestObject json.RawMessage `json:"requestObject"`
}

// IsCompletedWrite reports whether the event is the answer to a create,
// update, patch or delete by user (the log is written before the answer is
// sent, so a request that returned is in it).
func (ev AuditEvent) IsCompletedWrite(user string) bool {
	if ev.Stage != "ResponseComplete" || ev.User.Username != user {
		return false
	}
	switch ev.Verb {
	case "create", "update", "patch", "delete":
		return true
	}
	return false
}

// AuditLogPath is the file kube-apiserver writes its audit log to
// (Options.AuditLog), for commands that read it (review --audit-log).
func (e *Env) AuditLogPath(t testing.TB) string {
	t.Helper()
	if e.auditLogPath == "" {
		t.Fatal("AuditLogPath needs Options.AuditLog")
	}
	return e.auditLogPath
}

// AuditEvents reads kube-apiserver's audit log (Options.AuditLog).
func (e *Env) AuditEvents(t testing.TB) []AuditEvent {
	t.Helper()
	if e.auditLogPath == "" {
		t.Fatal("AuditEvents needs Options.AuditLog")
	}
	data, err := os.ReadFile(e.auditLogPath)
	if err != nil && !os.IsNotExist(err) {
		t.Fatalf("read the audit log: %v", err)
	}
	var out []AuditEvent
	for line := range strings.SplitSeq(string(data), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		var ev AuditEvent
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			continue // a line being written
		}
		out = append(out, ev)
	}
	return out
}

// AuditedWrite is one write of a webhook configuration in kube-apiserver's
// audit log (Options.AuditLog), as the API server answered it.
type AuditedWrite struct {
	Verb, Resource, Name, UserAgent string
	Code                            int
	Message                         string
	Received                        time.Time
	Annotations                     map[string]string
	// Request is the object the write sent (Options.AuditRequestsOf).
	Request json.RawMessage
}

// AuditedWrites are the create, update and patch requests of webhook
// configurations by user in kube-apiserver's audit log, with their answer
// (Options.AuditLog; the log is written before the answer is sent, so a
// request that returned is in it).
func (e *Env) AuditedWrites(t testing.TB, user string) []AuditedWrite {
	t.Helper()
	var out []AuditedWrite
	for _, ev := range e.AuditEvents(t) {
		if !ev.IsCompletedWrite(user) || ev.Verb == "delete" {
			continue
		}
		out = append(out, AuditedWrite{
			Verb: ev.Verb, Resource: ev.ObjectRef.Resource, Name: ev.ObjectRef.Name, UserAgent: ev.UserAgent,
			Code: ev.ResponseStatus.Code, Message: ev.ResponseStatus.Message,
			Received: ev.RequestReceivedTimestamp.Time, Annotations: ev.Annotations, Request: ev.RequestObject,
		})
	}
	return out
}
