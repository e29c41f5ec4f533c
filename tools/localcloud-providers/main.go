// terraform-provider-npa-localcloud: the Terraform providers upstream k8s-training requires, served by the
// local cloud (docs/local-cloud.md). One binary; the toolchain lays it out in a filesystem mirror under
// each provider's name, and it serves the provider its file name names. `--list` prints the mirror layout
// the toolchain creates (one "namespace type version hostname" line per address).
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/providerserver"

	"github.com/npa-pulumi/localcloud-providers/internal/registry"
	"github.com/npa-pulumi/localcloud-providers/schemas"
)

func main() {
	list := flag.Bool("list", false, "print every served provider address and exit")
	serve := flag.String("provider", "", "serve this provider type (default: from the binary's file name)")
	debug := flag.Bool("debug", false, "run with support for debuggers (TF_REATTACH_PROVIDERS)")
	flag.Parse()
	if err := registry.Load(schemas.Files); err != nil {
		log.Fatalf("the embedded provider schemas: %v", err)
	}

	if *list {
		for _, e := range registry.All() {
			for _, host := range e.Hostnames {
				fmt.Printf("%s %s %s %s\n", e.Namespace, e.Type, e.Version, host)
			}
		}
		return
	}
	typeName := *serve
	if typeName == "" {
		typeName = typeFromBinaryName(filepath.Base(os.Args[0]))
	}
	entry, ok := registry.ByType(typeName)
	if !ok {
		log.Fatalf("no local provider of type %q (binary %s); --list shows them", typeName, os.Args[0])
	}
	address := "registry.terraform.io/" + entry.Namespace + "/" + entry.Type
	err := providerserver.Serve(context.Background(), func() provider.Provider { return entry.New(entry.Version) },
		providerserver.ServeOpts{Address: address, Debug: *debug, ProtocolVersion: 6})
	if err != nil {
		log.Fatal(err)
	}
}

// typeFromBinaryName reads "terraform-provider-<type>_v<version>" (or without the version suffix).
func typeFromBinaryName(name string) string {
	name = strings.TrimPrefix(name, "terraform-provider-")
	if i := strings.Index(name, "_v"); i >= 0 {
		name = name[:i]
	}
	return name
}
