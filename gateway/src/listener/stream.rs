//! A TCP stream shared between hyper (which reads and writes it) and the connection's watchdog
//! (which may reset it): the only way to reach the socket once hyper owns the connection.
//!
//! Resetting (`SO_LINGER` 0, then close) is for a connection dropped because its reader stopped
//! reading: a plain close would leave the unsent answer queued in the kernel for as long as the
//! peer keeps its window shut; a reset discards it at once.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};
use tokio::net::TcpStream;

/// A [`TcpStream`] usable by hyper through [`hyper_util::rt::TokioIo`] while a [`Resetter`] holds
/// on to the same socket.
#[derive(Debug)]
pub struct SharedStream(Arc<TcpStream>);

/// Resets the connection of a [`SharedStream`].
#[derive(Debug)]
pub struct Resetter(Arc<TcpStream>);

/// Share `stream`.
pub fn share(stream: TcpStream) -> (SharedStream, Resetter) {
    let stream = Arc::new(stream);
    (SharedStream(Arc::clone(&stream)), Resetter(stream))
}

impl Resetter {
    /// Make the socket's close a reset, discarding anything still queued to send. The socket
    /// closes when the last holder (hyper's connection, this resetter) is dropped.
    pub fn reset_on_close(self) {
        // Linger 0 resets at once: the drop never blocks (tokio deprecates only waiting lingers).
        let _ = socket2::SockRef::from(self.0.as_ref()).set_linger(Some(Duration::ZERO));
    }
}

impl AsyncRead for SharedStream {
    /// One `recv` into the unfilled part of `buf` as it is: hyper hands over its read buffer's
    /// spare room uninitialised (8 KiB or more), and zeroing it first, as a plain `&mut [u8]` read
    /// needs, was about 1 % of the gateway's CPU per request (`perf`, 32 connections).
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        loop {
            ready!(self.0.poll_read_ready(cx))?;
            let room = buf.remaining();
            let mut received = None;
            // The read happens inside this `try_io`, whose readiness tick is taken before it: the
            // would-block below clears only the readiness this read saw, never one set since.
            let read = self.0.try_io(Interest::READABLE, || {
                let count = self.0.try_read_buf(&mut *buf)?;
                if count > 0 && count < room {
                    // A short read drained the socket (epoll is edge-triggered, as tokio's own
                    // `poll_read` assumes on Linux): report would-block so `try_io` clears the
                    // readiness and the next poll waits for the peer instead of a `recv` that
                    // can only fail with `EAGAIN` (one system call per request saved).
                    received = Some(count);
                    return Err(io::ErrorKind::WouldBlock.into());
                }
                Ok(count)
            });
            match (read, received) {
                // `try_read_buf` has advanced `buf` by what it read.
                (_, Some(_)) | (Ok(_), None) => return Poll::Ready(Ok(())),
                // Readiness was stale; `try_io` cleared it, so the next poll registers the waker.
                (Err(err), None) if err.kind() == io::ErrorKind::WouldBlock => {}
                (Err(err), None) => return Poll::Ready(Err(err)),
            }
        }
    }
}

impl AsyncWrite for SharedStream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        loop {
            ready!(self.0.poll_write_ready(cx))?;
            match self.0.try_write(data) {
                Ok(written) => return Poll::Ready(Ok(written)),
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => {}
                Err(err) => return Poll::Ready(Err(err)),
            }
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        loop {
            ready!(self.0.poll_write_ready(cx))?;
            match self.0.try_write_vectored(data) {
                Ok(written) => return Poll::Ready(Ok(written)),
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => {}
                Err(err) => return Poll::Ready(Err(err)),
            }
        }
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        // Nothing is buffered here: every write goes to the socket.
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        let shutdown = socket2::SockRef::from(self.0.as_ref()).shutdown(std::net::Shutdown::Write);
        Poll::Ready(match shutdown {
            // Already closed by the peer: nothing left to shut down.
            Err(err) if err.kind() == io::ErrorKind::NotConnected => Ok(()),
            other => other,
        })
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// A loopback connection: the client's end, and the accepted end shared.
    async fn connected() -> (TcpStream, SharedStream, Resetter) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let client = TcpStream::connect(listener.local_addr().expect("address")).await.expect("connect");
        let (accepted, _) = listener.accept().await.expect("accept");
        let (shared, resetter) = share(accepted);
        (client, shared, resetter)
    }

    #[tokio::test]
    async fn a_shared_stream_reads_writes_and_shuts_down() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let address = listener.local_addr().expect("address");
        let client = tokio::spawn(async move {
            let mut client = TcpStream::connect(address).await.expect("connect");
            client.write_all(b"ping").await.expect("write");
            let mut answer = Vec::new();
            client.read_to_end(&mut answer).await.expect("read");
            answer
        });
        let (accepted, _) = listener.accept().await.expect("accept");
        let (mut shared, _resetter) = share(accepted);
        let mut request = [0u8; 4];
        shared.read_exact(&mut request).await.expect("read");
        assert_eq!(&request, b"ping");
        shared.write_all(b"pong").await.expect("write");
        shared.shutdown().await.expect("shutdown");
        assert_eq!(client.await.expect("client"), b"pong");
    }

    #[tokio::test]
    async fn after_a_short_read_the_next_bytes_still_wake_the_reader() {
        let (mut client, mut shared, _resetter) = connected().await;
        let mut buffer = [0u8; 64];
        for part in [&b"first"[..], b"second", b"third"] {
            // Each part is a short read (readiness cleared); the next one arrives while the
            // reader waits, so only the peer's new data can wake it.
            let read = tokio::spawn(async move {
                let count = shared.read(&mut buffer).await.expect("read");
                (shared, buffer, count)
            });
            tokio::time::sleep(Duration::from_millis(20)).await;
            client.write_all(part).await.expect("write");
            let (back, filled, count) =
                tokio::time::timeout(Duration::from_secs(5), read).await.expect("woken").expect("task");
            assert_eq!(&filled[..count], part);
            (shared, buffer) = (back, filled);
        }
        drop(client);
        assert_eq!(shared.read(&mut buffer).await.expect("end"), 0, "the peer's close reads as the end");
    }

    #[tokio::test]
    async fn a_read_leaves_the_rest_of_an_uninitialised_buffer_untouched() {
        let (mut client, mut shared, _resetter) = connected().await;
        client.write_all(b"request").await.expect("write");
        let mut storage = [std::mem::MaybeUninit::<u8>::uninit(); 8192];
        let mut buf = ReadBuf::uninit(&mut storage);
        std::future::poll_fn(|cx| Pin::new(&mut shared).poll_read(cx, &mut buf)).await.expect("read");
        assert_eq!(buf.filled(), b"request");
        // Only what was received counts as initialised: the 8 KiB behind it were not zeroed.
        assert_eq!(buf.initialized().len(), b"request".len());
    }

    #[tokio::test]
    async fn a_reset_discards_what_was_not_sent() {
        let (client, shared, resetter) = connected().await;
        resetter.reset_on_close();
        drop(shared);
        let mut client = client;
        let mut buffer = [0u8; 8];
        let read = client.read(&mut buffer).await;
        assert!(
            matches!(&read, Err(err) if err.kind() == io::ErrorKind::ConnectionReset),
            "the peer sees a reset: {read:?}"
        );
    }
}
