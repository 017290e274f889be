// meridian's copy of etcd-client 0.21.1's build script: the protos are
// compiled by protox (a protobuf compiler in Rust) instead of a system
// `protoc`, so a machine with only a Rust toolchain builds fleet mode.
// Everything else in this crate is the published 0.21.1 (see VENDORED.md).

#[cfg(feature = "build-server")]
fn should_build_server() -> bool {
    true
}

#[cfg(not(feature = "build-server"))]
fn should_build_server() -> bool {
    false
}

fn main() {
    let proto_root = "proto";
    println!("cargo:rerun-if-changed={proto_root}");

    let fds = protox::compile(
        [
            "proto/etcd/api/authpb/auth.proto",
            "proto/etcd/api/etcdserverpb/rpc.proto",
            "proto/etcd/api/mvccpb/kv.proto",
            "proto/etcd/server/etcdserver/api/v3election/v3electionpb/v3election.proto",
            "proto/etcd/server/etcdserver/api/v3lock/v3lockpb/v3lock.proto",
        ],
        [proto_root],
    )
    .expect("Failed to parse proto files");

    tonic_prost_build::configure()
        .build_server(should_build_server())
        .compile_fds(fds)
        .expect("Failed to compile proto files");
}
