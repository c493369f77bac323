package protocol_test

import (
	"fmt"

	"github.com/normsim/normsim/protocol"
)

func ExampleParseJobFrame() {
	f, err := protocol.ParseJobFrame([]byte(`{"type":"state","payload":{"b":1,  "a":[1.50,2e3]},"note":"dropped"}`))
	fmt.Printf("%s %s %v\n", f.Type, f.Payload, err)

	_, err = protocol.ParseJobFrame([]byte(`{"type":"hello","token":null}`))
	fmt.Println(err)

	_, err = protocol.ParseJobFrame([]byte(`{"type":"get-state","migrationId":"m"}`))
	fmt.Println(err)
	// Output:
	// state {"b":1,  "a":[1.50,2e3]} <nil>
	// invalid frame: token: expected string, got null
	// invalid frame: unknown type "get-state" for job→worker
}

func ExamplePath() {
	fmt.Println(protocol.URL(protocol.ContainerHost, protocol.DefaultPort, "job/1", "key 2"))
	fmt.Println(protocol.ParsePath("/instances/job%2F1/key%202/?ignored"))
	// Output:
	// ws://host.docker.internal:6797/instances/job%2F1/key%202
	// job/1 key 2 true
}
