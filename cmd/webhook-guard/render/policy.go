package render

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	admv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/yaml"

	"github.com/webhook-guard/webhook-guard/cmd/webhook-guard/internal/cmdutil"
	"github.com/webhook-guard/webhook-guard/policy"
	"github.com/webhook-guard/webhook-guard/policy/vap"
	"github.com/webhook-guard/webhook-guard/policy/vap/cost"
	"github.com/webhook-guard/webhook-guard/webhook/casource"
	"github.com/webhook-guard/webhook-guard/webhook/policyca"
)

// PolicyOptions are the flags of render policy.
type PolicyOptions struct {
	genericiooptions.IOStreams

	Source      cmdutil.ConfigSource
	ObjectsPath string
	// CAParams makes policies whose CA is a Secret key read that Secret as
	// their param.
	CAParams bool
	// Explain prints before each policy what each of its expressions
	// enforces, with its CEL laid out for a reader.
	Explain bool
}

// NewCmdPolicy is `render policy`.
func NewCmdPolicy(ctx context.Context, streams genericiooptions.IOStreams) *cobra.Command {
	o := &PolicyOptions{IOStreams: streams}
	cmd := &cobra.Command{
		Use:   "policy --config guard.yaml|--values values.yaml [--objects objects.yaml]",
		Short: "Render the ValidatingAdmissionPolicies and bindings of the policy shape",
		Long: `Policy shape enforces the owner mappings with CEL inside kube-apiserver, for
clusters whose control plane can't load the static webhook (managed
clusters): ValidatingAdmissionPolicy is evaluated for webhook configuration
objects, API-registered webhooks are not.

This prints, per mapping, a ValidatingAdmissionPolicy (not-owner and
ca-mismatch, with the owner's CA bytes in the policy itself) and its binding
(Deny in enforce, Warn+Audit in audit). CA sources resolve against
--objects, as 'check' does. 'serve --policy-mode' keeps the
same objects in step with the cluster; apply this output only to try policy
mode or where the guard does not run.

CEL cannot parse PEM: a changed caBundle must be the owner's CA exactly as its
source holds it, or the stored caBundle followed by it (cainjector's merge). With
--ca-params, a policy whose CA is a Secret key reads that Secret as its param,
so that a rotation reaches kube-apiserver as it reaches the writer; whoever
applies such a policy must be allowed to get every Secret. See docs/rotation.md
and docs/concepts.md (the two shapes) for what the webhook enforces that this
mode cannot.

kube-apiserver checks no cost of a policy beforehand: an expression past its
runtime limit is cancelled and the write refused. For each webhook
configuration of --objects that a mapping owns, this runs the policies in
kube-apiserver's own engine on the owner's costliest writes (a rotation's
merge, every entry's caBundle followed by a new CA, and an ordinary write on
the merged bundles) and prints each one's cost against the limit; a write
kube-apiserver would refuse is an error, and the exit code is 1.`,
		Example: `  # The policies and bindings of the sample mappings, CAs from objects.yaml
  webhook-guard render policy --config config/samples/guard-koordinator.yaml \
    --objects config/samples/objects.yaml

  # What each expression of the policies enforces, as comments beside them
  webhook-guard render policy --config config/samples/guard-koordinator.yaml \
    --objects config/samples/objects.yaml --explain

  # Policies that read a Secret's CA as their param, from Helm values
  webhook-guard render policy --values values.yaml --ca-params`,
		Args: cobra.NoArgs,
		RunE: cmdutil.Runner(ctx, o),
	}
	f := cmd.Flags()
	o.Source.AddFileFlags(cmd, " (this or --values is required)")
	f.BoolVar(&o.CAParams, "ca-params", false, "Policies whose CA is a Secret key read that Secret as their param (applying them needs get on every Secret).")
	f.BoolVar(&o.Explain, "explain", false, "Before each policy, print as YAML comments what each matchCondition, variable and validation enforces, with its CEL laid out an operand per line (the output still applies).")
	f.StringVar(&o.ObjectsPath, "objects", "", "YAML stream of Secrets, ConfigMaps, cert-manager objects (and webhook configurations, for injectedByCertManager) that CA sources resolve against.")
	return cmd
}

// Complete has nothing to derive: Run reads the files the flags name.
func (o *PolicyOptions) Complete(_ []string) error { return nil }

// Validate has nothing to check that needs no file: Run names a missing
// or broken GuardConfig or objects file.
func (o *PolicyOptions) Validate() error { return nil }

// Run resolves the CAs against --objects and prints the policies and
// bindings; a CA that does not resolve is a warning on ErrOut. A write
// kube-apiserver would refuse for its cost is an error on ErrOut and makes
// the exit code Denied, after every document is printed.
func (o *PolicyOptions) Run(ctx context.Context) error {
	cfg, err := o.Source.LoadRequired(ctx)
	if err != nil {
		return err
	}
	objects, err := cmdutil.LoadObjects(o.ObjectsPath)
	if err != nil {
		return err
	}
	res := policyca.Resolve(ctx, cfg, casource.New(objects, casource.Options{}), objects, true)
	if !o.CAParams {
		res.DropParams()
	}
	printWarnings(o.ErrOut, cfg, res.CAs)
	objs, err := vap.Generate(vap.Input{Config: cfg, CAs: res.CAs})
	if err != nil {
		return cmdutil.Invalid("%v", err)
	}
	configurations, err := objects.WebhookConfigurations()
	if err != nil {
		return err
	}
	costs, err := cost.WorstWrites(ctx, cfg, res.CAs, configurations)
	if err != nil {
		return err
	}
	fmt.Fprintf(o.Out, "# webhook-guard policy shape, generated from %s: %d mapping(s)\n", o.Source.Name(), len(cfg.Spec.Owners))
	refused := printCosts(o.Out, o.ErrOut, costs)
	if err := printDocuments(o.Out, objs, o.Explain); err != nil {
		return err
	}
	if refused > 0 {
		return cmdutil.Denied()
	}
	return nil
}

// printWarnings warns, per mapping, of a CA that did not resolve and of a
// writeBudget the generated policies do not apply.
func printWarnings(errOut io.Writer, cfg *policy.Mappings, cas map[string]vap.CA) {
	for _, owner := range cfg.Spec.Owners {
		if ca := cas[owner.Name]; ca.Err != "" {
			fmt.Fprintf(errOut, "warning: owners[%s]: %s; its policy holds no CA, so its caBundle changes are denied until the guard resolves it\n", owner.Name, ca.Err)
		}
		if owner.WriteBudget != nil {
			fmt.Fprintf(errOut, "warning: owners[%s].writeBudget is not applied by the generated policies (their CEL keeps no state across requests); run the static shape to limit caBundle writes\n", owner.Name)
		}
	}
}

// printCosts prints each cost as a comment on out, and an error on errOut
// for each write kube-apiserver would refuse; it returns how many.
func printCosts(out, errOut io.Writer, costs []cost.ObjectResult) int {
	refused := 0
	for _, c := range costs {
		fmt.Fprintf(out, "# %s\n", cost.Describe(c.Mapping, c.Object, c.Result))
		if c.Result.Refused() {
			fmt.Fprintf(errOut, "error: %s\n", cost.Refusal(c.Mapping, c.Object, c.Result))
			refused++
		}
	}
	return refused
}

// printDocuments prints the policies, then the bindings, as a YAML stream:
// in apply order, so that no binding points at a missing policy.
func printDocuments(out io.Writer, objs *vap.Objects, explain bool) error {
	var docs []runtime.Object
	for _, p := range objs.Policies {
		docs = append(docs, p)
	}
	for _, b := range objs.Bindings {
		docs = append(docs, b)
	}
	for _, d := range docs {
		b, err := marshalClean(d)
		if err != nil {
			return err
		}
		fmt.Fprint(out, "---\n")
		if p, ok := d.(*admv1.ValidatingAdmissionPolicy); ok && explain {
			if err := printExplanation(out, p); err != nil {
				return err
			}
		}
		fmt.Fprintf(out, "%s", b)
	}
	return nil
}

// marshalClean prints an object without the empty creationTimestamp and
// status a typed object carries.
func marshalClean(obj runtime.Object) ([]byte, error) {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	if md, ok := u["metadata"].(map[string]any); ok {
		delete(md, "creationTimestamp")
	}
	delete(u, "status")
	return yaml.Marshal(u)
}
