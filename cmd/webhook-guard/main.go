// Command webhook-guard enforces single ownership of Kubernetes webhook
// configurations. See `webhook-guard --help`.
package main

import (
	"os"

	"github.com/webhook-guard/webhook-guard/cmd/webhook-guard/app"
)

func main() {
	os.Exit(app.Main(os.Args[1:], os.Stdout, os.Stderr))
}
