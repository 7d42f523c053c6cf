// Package dispatch holds the two statements of a release run across a
// fleet, and their verification. The release owner signs a dispatch: the
// build subjects, the pipeline and source, and every job with its class,
// selectors, targets, a fresh nonce and a public key of its own (in-toto's
// layout idea: the owner authorises one functionary key per job, and
// nothing else may sign for that job). Each node signs a node statement
// with its job's key: the dispatch's digest, the job's nonce, the
// scheduler's job ID and node name, the node's hardware record and its
// results. Verify checks that every job reported exactly once, signed by
// its delegated key, on hardware that matches its class.
package dispatch
