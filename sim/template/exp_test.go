package template

import (
	"context"
	"fmt"
	"testing"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
)

func TestExp(t *testing.T) {
	y := `
services:
  a:
    image: x:${TAG:-dev}
    ports: ["${PORT}:${PORT}/udp", "8080"]
    environment:
      R: ${RATE}
      FOO:
    extra_hosts: ["h:1.2.3.4"]
    cpus: ${CPUS}
    depends_on: [b]
    x-normsim:
      command: ["go", "run", "${RATE}"]
      dir: ../..
    healthcheck:
      test: ["CMD", "true"]
      interval: 5s
    volumes: ["./data:/data:ro"]
    env_file: [nope.env]
  b:
    image: y
`
	for _, skip := range []bool{true, false} {
		p, err := loader.LoadWithContext(context.Background(), types.ConfigDetails{
			WorkingDir:  "/tmp/tpl",
			ConfigFiles: []types.ConfigFile{{Filename: "compose.yml", Content: []byte(y)}},
			Environment: types.Mapping{"RATE": "7", "PORT": "5000", "CPUS": "1"},
		}, func(o *loader.Options) {
			o.SetProjectName("normsim-x", true)
			o.SkipInterpolation = skip
			o.SkipResolveEnvironment = skip
		})
		fmt.Println(skip, err)
		if p != nil {
			s := p.Services["a"]
			fmt.Printf("%+v\n%+v\n%+v\n%#v\n%v\n", s.Ports, s.Environment, s.ExtraHosts, s.Extensions, s.Volumes)
		}
	}
}
