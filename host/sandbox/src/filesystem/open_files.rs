//! A cap on the files and directories a run has open at once
//! ([`RunLimits::max_open_files`](moat_engine::RunLimits)): each is a file
//! descriptor of the host, and the host's descriptors are shared by every
//! run. Opening one more answers the guest `quota` (too many open files);
//! dropping one makes room again. (The run's granted directories, opened
//! for it at the start, do not count.)

use wasmtime::component::{LinkerInstance, Resource, ResourceType};
use wasmtime_wasi::filesystem::{Descriptor, WasiFilesystemView};
use wasmtime_wasi::p2::bindings::filesystem::types::{
    DescriptorFlags, ErrorCode, HostDescriptor, OpenFlags, PathFlags,
};

use crate::state::RunState;

/// Replaces `open-at` and the `descriptor` resource's destructor in
/// `types` with counting ones.
pub(super) fn shadow(types: &mut LinkerInstance<'_, RunState>) -> wasmtime::Result<()> {
    types.func_wrap_async(
        "[method]descriptor.open-at",
        |mut store,
         (fd, path_flags, path, open_flags, flags): (
            Resource<Descriptor>,
            PathFlags,
            String,
            OpenFlags,
            DescriptorFlags,
        )| {
            Box::new(async move {
                let state = store.data_mut();
                if state.open_files >= state.max_open_files {
                    tracing::info!(
                        adapter = %state.adapter,
                        "an open over the run's {} open files was refused",
                        state.max_open_files
                    );
                    return Ok((Err(ErrorCode::Quota),));
                }
                let mut view = state.filesystem();
                let opened =
                    HostDescriptor::open_at(&mut view, fd, path_flags, path, open_flags, flags)
                        .await;
                match opened {
                    Ok(descriptor) => {
                        state.open_files += 1;
                        Ok((Ok(descriptor),))
                    }
                    Err(error) => Ok((Err(error.downcast()?),)),
                }
            })
        },
    )?;
    types.resource(
        "descriptor",
        ResourceType::host::<Descriptor>(),
        |mut store, rep| {
            let state = store.data_mut();
            // A preopened directory was never counted.
            state.open_files = state.open_files.saturating_sub(1);
            HostDescriptor::drop(&mut state.filesystem(), Resource::new_own(rep))
        },
    )
}
