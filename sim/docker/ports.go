package docker

import (
	"cmp"
	"context"
	"slices"
	"strconv"

	"github.com/docker/docker/api/types/container"

	"github.com/normsim/normsim/sim"
)

var _ sim.PortReporter = (*Runtime)(nil)

// PublishedPorts reads back the host ports an instance's running containers
// bound, as the engine reports them: the address and port the engine
// picked for a port published without a host port included. It looks the
// containers up by label, however they were created.
func (r *Runtime) PublishedPorts(ctx context.Context, instanceID string) ([]sim.PublishedPort, error) {
	if err := r.connect(ctx); err != nil {
		return nil, err
	}
	list, err := r.cli.ContainerList(ctx, container.ListOptions{Filters: r.filterOf(instanceID)})
	if err != nil {
		return nil, r.engineErr("list containers of instance "+instanceID, err)
	}
	var out []sim.PublishedPort
	for _, c := range list {
		info, err := r.cli.ContainerInspect(ctx, c.ID)
		if err != nil {
			return nil, r.engineErr("inspect container of instance "+instanceID, err)
		}
		if info.NetworkSettings == nil {
			continue
		}
		for port, bindings := range info.NetworkSettings.Ports {
			for _, b := range bindings {
				hostPort, err := strconv.Atoi(b.HostPort)
				if err != nil {
					continue
				}
				out = append(out, sim.PublishedPort{Service: c.Labels[sim.LabelService], ContainerPort: port.Int(),
					Protocol: port.Proto(), HostIP: b.HostIP, HostPort: hostPort})
			}
		}
	}
	slices.SortFunc(out, func(a, b sim.PublishedPort) int {
		return cmp.Or(cmp.Compare(a.Service, b.Service), cmp.Compare(a.ContainerPort, b.ContainerPort),
			cmp.Compare(a.Protocol, b.Protocol), cmp.Compare(a.HostIP, b.HostIP), cmp.Compare(a.HostPort, b.HostPort))
	})
	return out, nil
}
