//! The in-flight budget every endpoint of a server shares: how many reviews, and how many body
//! bytes, may be held at once. The server reserves before reading a body; the allocator trim
//! ([`crate::server::trim`]) reads it to know when a burst is over.

use std::sync::Arc;

/// What all reviews in flight may hold together: bytes and a count, shared by every endpoint.
#[derive(Debug)]
pub struct Budget {
    bytes: Arc<tokio::sync::Semaphore>,
    reviews: Arc<tokio::sync::Semaphore>,
    total_bytes: usize,
}

impl Budget {
    /// `bytes` (at least `body_limit`, so a body the limit allows can always be admitted alone)
    /// and `reviews` at once.
    pub fn new(bytes: usize, body_limit: usize, reviews: usize) -> Self {
        let total_bytes = bytes.max(body_limit).max(1);
        Self {
            bytes: Arc::new(tokio::sync::Semaphore::new(total_bytes)),
            reviews: Arc::new(tokio::sync::Semaphore::new(reviews.max(1))),
            total_bytes,
        }
    }

    /// Bytes reserved by reviews in flight now.
    pub fn in_use(&self) -> usize {
        self.total_bytes
            .saturating_sub(self.bytes.available_permits())
    }

    /// Reserves one review of `bytes`, or `None` when the budget is spent.
    pub(crate) fn reserve(
        &self,
        bytes: usize,
    ) -> Option<(
        tokio::sync::OwnedSemaphorePermit,
        tokio::sync::OwnedSemaphorePermit,
    )> {
        let review = self.reviews.clone().try_acquire_owned().ok()?;
        let n = u32::try_from(bytes.max(1)).unwrap_or(u32::MAX);
        let bytes = self.bytes.clone().try_acquire_many_owned(n).ok()?;
        Some((review, bytes))
    }
}
