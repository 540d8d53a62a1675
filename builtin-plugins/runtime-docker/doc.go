// Command runtime-docker is fluffy's default container-runtime adapter: a
// `runtime`-kind plugin that executes the sandbox package's container specs
// through the Docker Engine API (DOCKER_HOST, else /var/run/docker.sock).
// Podman's Docker-compatible API is not supported: it takes a seccomp
// profile as a file path where Docker takes the profile's JSON, so no
// sandbox starts there. It is the only fluffy
// component that holds the engine socket. It adds no policy of its own: it
// applies a spec as given and must never mount the engine socket into a
// container it creates (it refuses specs that try).
package main
