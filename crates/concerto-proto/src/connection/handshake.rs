//! The client's side of the handshake with a server: hello, the server's
//! challenge, the client's proof, and the server's welcome with its own
//! proof; a refusal or a busy server told apart.

use std::net::SocketAddr;

use futures::StreamExt;
use tokio::net::tcp::OwnedWriteHalf;
use tokio_util::codec::{FramedRead, LengthDelimitedCodec};

use super::{ClientError, StampedRead};
use crate::auth::{self, Credential, Grant};
use crate::integrity::{Ask, Session};
use crate::{Envelope, ErrorKind, Message, VERSION};

/// What the server said instead of going on: `Busy` is no refusal of the
/// key (the address has its cap of connections, or newer handshakes
/// closed this one) and is worth trying again.
fn stopped(server: SocketAddr, kind: ErrorKind, message: String) -> ClientError {
    match kind {
        ErrorKind::Busy => ClientError::Server {
            server,
            kind,
            message: format!("server {server}: {message}"),
        },
        _ => ClientError::Auth { server, message },
    }
}

/// The server's next handshake message; a server of another wire version
/// is told apart before its frame is decoded.
async fn next_message(
    server: SocketAddr,
    frames: &mut FramedRead<StampedRead, LengthDelimitedCodec>,
) -> Result<Message, ClientError> {
    match frames.next().await {
        Some(Ok(frame)) => match Envelope::peek_version(&frame) {
            // Another release's server (or this one's, with a client
            // library, mount or MPI-IO library from another build).
            Some(theirs) if theirs != VERSION => Err(ClientError::Server {
                server,
                kind: ErrorKind::Protocol,
                message: format!(
                    "server {server} speaks wire version {theirs}, this client {VERSION}: \
                     run one Concerto release on servers and clients (`make build` relinks \
                     the MPI-IO library)"
                ),
            }),
            _ => Envelope::decode(frame.freeze())
                .map(|e| e.message)
                .map_err(|_| ClientError::Unexpected { server }),
        },
        _ => Err(ClientError::Closed { server }),
    }
}

/// The client's side of the handshake: hello, the server's challenge, our
/// proof, and the server's welcome with its own proof.
pub(super) async fn handshake(
    server: SocketAddr,
    frames: &mut FramedRead<StampedRead, LengthDelimitedCodec>,
    writer: &mut OwnedWriteHalf,
    (credential, ask): (&Credential, Ask),
) -> Result<(Grant, Option<Session>), ClientError> {
    let closed = || ClientError::Closed { server };
    let refused = |message: String| ClientError::Auth { server, message };
    let stopped = |kind: ErrorKind, message: String| stopped(server, kind, message);
    let ours = auth::random().map_err(refused)?;
    let id = credential.id.clone();
    let asked = ask.asks(server.ip());
    Envelope::new(
        0,
        Message::Hello {
            key_id: id.clone(),
            nonce: ours,
            integrity: asked,
        },
    )
    .write_to(&mut *writer, None)
    .await
    .map_err(|_| closed())?;
    let theirs = match next_message(server, frames).await? {
        Message::Challenge { nonce } => nonce,
        Message::Error { kind, message } => return Err(stopped(kind, message)),
        _ => return Err(ClientError::Unexpected { server }),
    };
    let exchange = |integrity| auth::Exchange {
        key_id: &id,
        client: &ours,
        server: &theirs,
        integrity,
    };
    let mac = auth::proof(auth::Side::Client, &credential.secret, exchange(asked));
    Envelope::new(0, Message::Proof { mac })
        .write_to(&mut *writer, None)
        .await
        .map_err(|_| closed())?;
    match next_message(server, frames).await? {
        Message::Welcome {
            grant,
            integrity,
            mac,
        } => {
            if !auth::verify(
                auth::Side::Server,
                &credential.secret,
                exchange(integrity),
                &mac,
            ) {
                return Err(refused(format!(
                    "the server does not hold key {id:?} (its proof is wrong)"
                )));
            }
            if asked && !integrity {
                return Err(refused(
                    "the server did not turn on integrity on the wire, which this client asked for"
                        .into(),
                ));
            }
            let session =
                integrity.then(|| Session::client(&credential.secret, &id, &ours, &theirs));
            Ok((grant, session))
        }
        Message::Error { kind, message } => Err(stopped(kind, message)),
        _ => Err(ClientError::Unexpected { server }),
    }
}
