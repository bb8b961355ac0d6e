"""The payload bucket: large payloads (the S3 claim check, docs/architecture.md).

Private (every public access blocked, ACLs off, bucket owner enforced), TLS only, encrypted
at rest with S3-managed keys (the same reasoning as the table's AWS-owned key: IAM decides
who reads, a customer key would add a KMS request per object and `kms:*` on every role), no
versions (objects are write-once by their content hash; nothing is ever overwritten).

Lifecycle: objects under `wf/` expire `retention_days + live_days` after they were written.
A workflow's items expire `retention_days` after it finishes; its payloads were written while
it ran, so they outlive its items as long as it finished within `live_days` of writing them
(a workflow that runs longer reads `PayloadMissing`: docs/architecture.md, Known limits).
Objects no reference names (an attempt whose write lost) go with them. Unfinished multipart
uploads are aborted after a day, and `uploads/` (presigned uploads a start never used) after a
day too.
"""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy, Stack, aws_iam, aws_lambda, aws_s3
from constructs import Construct

from shepherd_infra.nag import acknowledge
from shepherd_infra.runtime import allow, holder_of

PAYLOAD_PREFIX = "wf/"
UPLOAD_PREFIX = "uploads/"
UPLOAD_DAYS = 1


class PayloadStore(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        retention_days: int,
        live_days: int,
        retain: bool,
    ) -> None:
        super().__init__(scope, construct_id)
        self.expiration_days = retention_days + live_days
        self._listers: set[str] = set()  # the functions granted ListBucket (once each)
        self.bucket = aws_s3.Bucket(
            self,
            "Bucket",
            encryption=aws_s3.BucketEncryption.S3_MANAGED,
            block_public_access=aws_s3.BlockPublicAccess.BLOCK_ALL,
            object_ownership=aws_s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            enforce_ssl=True,
            versioned=False,
            lifecycle_rules=[
                aws_s3.LifecycleRule(
                    id="workflow-payloads",
                    prefix=PAYLOAD_PREFIX,
                    expiration=Duration.days(self.expiration_days),
                ),
                aws_s3.LifecycleRule(
                    id="abandoned-uploads",
                    prefix=UPLOAD_PREFIX,
                    expiration=Duration.days(UPLOAD_DAYS),
                ),
                aws_s3.LifecycleRule(
                    id="unfinished-multipart",
                    abort_incomplete_multipart_upload_after=Duration.days(1),
                ),
            ],
            removal_policy=(
                RemovalPolicy.RETAIN_ON_UPDATE_OR_DELETE if retain else RemovalPolicy.DESTROY
            ),
            # `retain_data=false`: the bucket goes with the stack, and CloudFormation cannot
            # delete a bucket that holds an object, so the CDK's custom resource empties it
            # first (a function that runs on delete only).
            auto_delete_objects=not retain,
        )
        acknowledge(
            self.bucket,
            "AwsSolutions-S1",
            "Server access logs would log every payload GET and PUT of every step into a second "
            "bucket; CloudTrail data events can be enabled per deployment when an audit needs "
            "object-level records",
        )

    @property
    def payload_objects(self) -> str:
        """The ARN pattern of every workflow payload (and nothing else in the bucket)."""
        return self.bucket.arn_for_objects(f"{PAYLOAD_PREFIX}*")

    @property
    def upload_objects(self) -> str:
        """The ARN pattern of presigned uploads (POST /payloads) and nothing else."""
        return self.bucket.arn_for_objects(f"{UPLOAD_PREFIX}*")

    def grant_uploads(self, fn: aws_lambda.Function, *, sign: bool) -> None:
        """What using an upload needs, on `uploads/*` only: GetObject (a start or a callback's
        success reads it), DeleteObject (removes it once used), and if `sign` PutObject (what
        POST /payloads signs the presigned POST with: the caller writes as this role)."""
        actions = ["s3:GetObject", "s3:DeleteObject"]
        self._grant_list(fn)
        allow(
            fn,
            aws_iam.PolicyStatement(
                actions=["s3:PutObject", *actions] if sign else actions,
                resources=[self.upload_objects],
            ),
        )
        self._acknowledge_prefix(
            fn,
            UPLOAD_PREFIX,
            "Object-level Get/DeleteObject (and Put to sign) on the upload prefix only: each "
            "upload's key is made at run time from the caller and a random id, so no fixed ARN "
            "can name it",
        )

    def _acknowledge_prefix(
        self,
        fn: aws_lambda.Function,
        prefix: str = PAYLOAD_PREFIX,
        reason: str = "Object-level GetObject/PutObject on the payload prefix only: keys are "
        "made by the engine per workflow, step and attempt at run time, so no fixed ARN can "
        "name them",
    ) -> None:
        """cdk-nag's IAM5 (a wildcard resource) acknowledged for one prefix of the bucket."""
        stack = Stack.of(self)
        bucket_id = stack.resolve(stack.get_logical_id(self.bucket.node.default_child))  # type: ignore[arg-type]
        acknowledge(
            holder_of(fn), f"AwsSolutions-IAM5[Resource::<{bucket_id}.Arn>/{prefix}*]", reason
        )

    def grant_read(self, fn: aws_lambda.Function) -> None:
        """GetObject on workflow payloads only (also what a presigned download is signed with).
        Exact actions: the CDK's grant_read would add `s3:GetObject*`, `s3:List*`."""
        allow(
            fn, aws_iam.PolicyStatement(actions=["s3:GetObject"], resources=[self.payload_objects])
        )
        self._acknowledge_prefix(fn)
        self._grant_list(fn)

    def _grant_list(self, fn: aws_lambda.Function) -> None:
        """ListBucket on the bucket, for every role that reads it: S3 answers a missing key 404
        (NoSuchKey) only to a caller that may list the bucket, and 403 to anyone else, so
        without it a permission mistake and a missing object look alike, and the engine had to
        read every 403 as "missing" (a step or a start failed for good). With it, a 403 is
        always a denial: a store error, retried (shepherd.adapters.s3; issue 35.1). The key
        names it lists are workflow ids, which the role may read the objects of anyway."""
        path = fn.node.path
        if path in self._listers:
            return
        self._listers.add(path)
        allow(
            fn,
            aws_iam.PolicyStatement(actions=["s3:ListBucket"], resources=[self.bucket.bucket_arn]),
        )

    def grant_write(self, fn: aws_lambda.Function) -> None:
        """PutObject on workflow payloads only: never a delete, never another prefix."""
        allow(
            fn, aws_iam.PolicyStatement(actions=["s3:PutObject"], resources=[self.payload_objects])
        )
        self._acknowledge_prefix(fn)
