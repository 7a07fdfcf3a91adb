package serve

import (
	"github.com/go-logr/logr"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/webhook-guard/webhook-guard/webhook"
	"github.com/webhook-guard/webhook-guard/webhook/observe"
)

// addObserver runs the observer on the leader: it decides observed changes
// with the admission handler's CA resolver and policy code, without
// admission's waits (observe.CADecider: reads it starts run in the
// background), and records them through the same recorders, marked
// observed.
func addObserver(mgr ctrl.Manager, store webhook.ConfigSource, handler *webhook.Handler, recorder webhook.Recorder, log logr.Logger) error {
	kube, err := kubernetes.NewForConfig(mgr.GetConfig())
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(mgr.GetConfig())
	if err != nil {
		return err
	}
	return mgr.Add(&observe.Observer{
		Kube:     kube,
		Dynamic:  dyn,
		Config:   store,
		Decider:  &observe.CADecider{Config: store, CA: handler.CA, Fingerprints: handler.Fingerprints},
		Recorder: recorder,
		Metrics:  observe.NewMetrics(ctrlmetrics.Registry),
		Log:      log,
	})
}
