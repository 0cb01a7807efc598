//! MPI-IO for unmodified MPI programs (resonant-io.txt's resonant I/O made
//! real): the Rust half of the library MPI programs preload.
//!
//! The MPI side, `c/concerto_mpiio.c`, defines the `MPI_File_*` entry
//! points through MPI's profiling interface, as Darshan does: a file named
//! `concerto:/PATH` (ROMIO's convention for naming a driver) or lying under
//! a Concerto mount is served here; every other file goes to the MPI
//! library (`PMPI_File_*`) untouched. It is compiled once per MPI library
//! (their handles and constants differ) and linked with this crate's
//! static library. That side reads MPI's datatypes and moves bytes between
//! ranks; this side does the rest, where it can be tested without MPI:
//!
//! - [`datatype`]: derived datatypes flattened into their blocks;
//! - [`view`]: file views and memory buffers as streams of bytes;
//! - [`hints`]: `MPI_Info` hints (strategy, ROMIO's collective-buffering
//!   options, the layout of a new file);
//! - [`access`]: one read or write, and independent I/O;
//! - [`collective`]: core's `CollectivePlan` for every rank's accesses,
//!   executed as this rank's part (the simulator runs the same plans);
//! - [`session`]: the process's client of the cluster and its open files;
//! - [`ffi`]: the C ABI between the two sides.

pub mod access;
pub mod collective;
pub mod datatype;
pub mod ffi;
pub mod hints;
pub mod session;
pub mod view;
