package cli

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/docker/docker/client"
	"github.com/spf13/cobra"

	"github.com/normsim/normsim/app"
	"github.com/normsim/normsim/sim/docker"
)

func newBuildExamplesCmd(env Env) *cobra.Command {
	dir := "examples/jobs"
	cmd := &cobra.Command{
		Use:   "build-examples [NAME...]",
		Short: "Build the example jobs into FROM-scratch Docker images",
		Long: `Compile each example job under examples/jobs (or --dir) into a static Linux
binary and build it into the image normsim/<name>:src-<hash> through the
Docker engine's API. The tag is derived from the job's sources (its
packages in this module, go.mod and go.sum), so two checkouts on one engine
do not overwrite each other's images; the templates name these tags. No
base image and no registry are involved, so it works offline.`,
		Example: `  normsim build-examples
  normsim build-examples counter`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if st, err := os.Stat(dir); err != nil || !st.IsDir() {
				// The examples are built from their sources, which a
				// binary run outside normsim's checkout does not have.
				return usageErr("no directory %s here: build-examples compiles the example jobs from normsim's source checkout; run it from the checkout's root, or pass --dir", dir)
			}
			names := args
			if len(names) == 0 {
				var err error
				if names, err = app.ExampleNames(dir); err != nil {
					return usageErr("%v (run from the repository root or pass --dir)", err)
				}
			}
			cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
			if err != nil {
				return err
			}
			defer cli.Close()
			pctx, cancel := context.WithTimeout(cmd.Context(), 3*time.Second)
			_, err = cli.Ping(pctx)
			cancel()
			if err != nil {
				return fmt.Errorf("the Docker engine does not answer (DOCKER_HOST=%q): %w", cli.DaemonHost(), err)
			}
			return docker.BuildGoImages(cmd.Context(), cli, dir, names, func(src string) (string, error) { return app.ExampleImage(cmd.Context(), src) }, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&dir, "dir", dir, "directory of example jobs")
	return cmd
}
