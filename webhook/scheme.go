package webhook

import (
	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	reportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// NewScheme knows the core types, cert-manager's, which CA sources read,
// and OpenReports', which records are written as.
func NewScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := cmapi.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := reportsv1alpha1.Install(s); err != nil {
		return nil, err
	}
	return s, nil
}
