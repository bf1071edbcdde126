"""Every private torch API we use, wrapped in one place (this package).

Each private API is wrapped by exactly one module here, named for the part of torch it
serves (tracing, node_meta, dynamo, inductor, profiler, store, ...); callers import that
module (`from torch_localmap._torch_private import node_meta`), never torch's private
names. Each module says at its top which torch release its wrappers were written for, so
an upgrade that breaks a wrapper changes that module only. A new wrapper goes into the
module of its role, or a new one named for it: this file re-exports nothing.
"""
